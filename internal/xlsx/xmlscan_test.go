package xlsx

import (
	"bufio"
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

// stdTokens reads XML with encoding/xml, as xmlScanner should: local names,
// attributes, text with adjacent pieces joined; comments, processing
// instructions and directives dropped.
func stdTokens(data []byte) ([]string, error) {
	d := xml.NewDecoder(bytes.NewReader(data))
	var out []string
	text := ""
	flush := func() {
		if text != "" {
			out = append(out, "T "+text)
			text = ""
		}
	}
	for {
		tok, err := d.RawToken()
		if err == io.EOF {
			flush()
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			flush()
			s := "S " + t.Name.Local
			for _, a := range t.Attr {
				s += " " + a.Name.Local + "=" + a.Value
			}
			out = append(out, s)
		case xml.EndElement:
			flush()
			out = append(out, "E "+t.Name.Local)
		case xml.CharData:
			text += string(t)
		case xml.Directive:
			return nil, errDoctype
		}
	}
}

func fastTokens(data []byte, bufSize int) ([]string, error) {
	x, err := newXMLScanner(bytes.NewReader(data), 1<<20)
	if err != nil {
		return nil, err
	}
	if bufSize > 0 {
		// A few bytes a time through a small buffer: tokens and
		// references straddle reads.
		x.r = bufio.NewReaderSize(&trickle{data: data, n: 3}, bufSize)
	}
	var out []string
	text := ""
	for {
		x.wantText = true
		if !x.next() {
			break
		}
		switch x.kind {
		case tokStart:
			if text != "" {
				out = append(out, "T "+text)
				text = ""
			}
			s := "S " + string(x.name)
			for _, a := range x.attrs {
				s += " " + string(a.name) + "=" + string(a.value)
			}
			out = append(out, s)
		case tokEnd:
			if text != "" {
				out = append(out, "T "+text)
				text = ""
			}
			out = append(out, "E "+string(x.name))
		case tokText:
			text += string(x.text)
		}
	}
	if text != "" {
		out = append(out, "T "+text)
	}
	return out, x.err
}

func TestXMLScanner(t *testing.T) {
	for _, in := range []string{
		`<?xml version="1.0" encoding="UTF-8" standalone="yes"?><a><b x="1" y='2'/><c>t&amp;&lt;&gt;&quot;&apos;&#65;&#x42;</c></a>`,
		`<x:worksheet xmlns:x="urn:x"><x:sheetData><x:row r="1"><x:c r="A1" t="s"><x:v>0</x:v></x:c></x:row></x:sheetData></x:worksheet>`,
		"<a>line\r\nbreak\rand &#13; kept</a>",
		`<a><!-- a comment with <tags> --><b>x<![CDATA[<raw & text>]]>y</b><?pi stuff?></a>`,
		`<a  b = "1"  c='x&amp;y' ><d /></a >`,
		`<si><t xml:space="preserve">  two  spaces </t></si>`,
		"<a>" + strings.Repeat("long text &amp; more ", 2000) + "</a>",
	} {
		want, err := stdTokens([]byte(in))
		if err != nil {
			t.Fatalf("encoding/xml: %v", err)
		}
		for _, size := range []int{0, 16, 17, 19} {
			got, err := fastTokens([]byte(in), size)
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("read %.60q (buffer %d):\ngot  %q, %v\nwant %q", in, size, got, err, want)
			}
		}
	}
	for _, in := range []string{
		`<!DOCTYPE a [<!ENTITY e "boom">]><a>&e;</a>`,
		`<a>&unknown;</a>`,
		`<a b=1></a>`,
		`<a>&#0;</a>`,
		`<a`,
	} {
		if _, err := fastTokens([]byte(in), 0); err == nil {
			t.Errorf("read %q without an error", in)
		}
	}
	if _, err := fastTokens([]byte(`<!DOCTYPE a><a/>`), 0); !errors.Is(err, errDoctype) {
		t.Errorf("a DOCTYPE gave %v", err)
	}
}

// FuzzXMLScanner checks xmlScanner against encoding/xml on whatever
// encoding/xml reads.
func FuzzXMLScanner(f *testing.F) {
	for _, s := range []string{
		`<a><b x="1">t&amp;u</b><c/></a>`,
		`<x:row r="2"><x:c r="B2" t="inlineStr"><x:is><x:t>hi</x:t></x:is></x:c></x:row>`,
		"<a>\r\n<![CDATA[x]]><!--c--></a>",
		"<a x=\"1\r\n2\r3&#13;4\r\r\"/>", // line breaks in a value; a referenced \r stays
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		want, err := stdTokens(data)
		if err != nil || len(data) > 1<<16 || bytes.Contains(data, []byte("<?xml")) || !xmlNamesPlain(want) {
			fastTokens(data, 16) // must not panic
			return
		}
		got, err := fastTokens(data, 16)
		if err != nil {
			t.Fatalf("encoding/xml reads %q as %q; xmlScanner fails: %v", data, want, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("read %q:\ngot  %q\nwant %q", data, got, want)
		}
	})
}

// xmlNamesPlain says whether the tokens' names are what xmlScanner reads
// alike: encoding/xml keeps names such as "a:b:c" whole.
func xmlNamesPlain(tokens []string) bool {
	for _, t := range tokens {
		if t[0] != 'T' && strings.Count(t, ":") > 0 {
			return false
		}
	}
	return true
}

type trickle struct {
	data []byte
	n    int
}

func (r *trickle) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), r.n, len(r.data))
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}
