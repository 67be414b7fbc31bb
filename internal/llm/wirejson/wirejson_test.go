package wirejson

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// value has a field of every kind the readers read.
type value struct {
	S   string          `json:"s"`
	SP  *string         `json:"sp"`
	I   int             `json:"i"`
	IP  *int            `json:"ip"`
	I64 int64           `json:"i64"`
	B   bool            `json:"b"`
	Raw json.RawMessage `json:"raw"`
	In  inner           `json:"in"`
	P   *inner          `json:"p"`
	L   []inner         `json:"l"`
}

type inner struct {
	S string  `json:"s"`
	L []inner `json:"l"`
}

func readValue(r *Reader, v *value) {
	r.Object(
		String("s", &v.S), StringPtr("sp", &v.SP), Int("i", &v.I), IntPtr("ip", &v.IP), Int64("i64", &v.I64),
		Bool("b", &v.B), Raw("raw", &v.Raw), Struct("in", &v.In, readInner), Ptr("p", &v.P, readInner), Slice("l", &v.L, readInner),
	)
}

func readInner(r *Reader, v *inner) {
	r.Object(String("s", &v.S), Slice("l", &v.L, readInner))
}

// Texts the reader reads itself: each must decode as encoding/json decodes it.
var read = []string{
	`{}`, ` { } `, "\t\r\n{\"s\":\"x\"}\n", `null`,
	`{"s":"plain","sp":"p","i":-12,"ip":0,"i64":9223372036854775807,"b":true,"raw":{"a":[1,"x",null]},"in":{"s":"i"},"p":{"s":"q"},"l":[{"s":"a"},{"l":[]}]}`,
	`{"s":null,"sp":null,"i":null,"ip":null,"i64":null,"b":null,"raw":null,"in":null,"p":null,"l":null}`,
	`{"l":[]}`, `{"i":-0}`, `{"i64":-9223372036854775808}`, `{"b":false}`, `{"raw":"a\"b"}`, `{"raw":-1.5e+3}`,
	`{"s":"\"\\\/\b\f\n\r\t\u0041\u00e9\u4e2d"}`,
	`{"s":"\ud83d\ude00 pair, \ud83d lone high, \ude00 lone low, \ud83d\u0041 high then letter, \ud83d\ud83d\ude00 high then pair"}`,
	`{"s":"\uDBFF\uDFFF\uFFFD\u0000"}`,
	"{\"s\":\"caf\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80 \xef\xbf\xbd\"}",
	"{\"s\":\"bad \xff \xfe\xfe \xc3 \xed\xa0\x80 \xf4\x90\x80\x80 \xe2\x82\"}",
	"{\"unknown\xff\":1,\"x\":[{\"y\":\"\xff\"}]}",
	`{"unknown":{"s":1,"i":"x","deep":[[[[{}]]]]},"other":[true,false,null,0,1.5,-2e-3,"s"]}`,
	`{"\u0073":"escaped key"}`, "{\"\u212a\":\"Kelvin, no field\"}",
	`{"x":` + strings.Repeat("[", 900) + strings.Repeat("]", 900) + `}`,
}

// Texts the reader gives up on, for encoding/json to decode or reject.
var givenUp = []string{
	``, ` `, `{`, `{"s":"x"`, `{"s":"x",}`, `{"s" "x"}`, `{,}`, `{}x`, `{} {}`, `[]`, `"s"`, `1`, `true`, "\xef\xbb\xbf{}",
	`{"s":1}`, `{"s":{}}`, `{"sp":true}`, `{"i":1.0}`, `{"i":1e2}`, `{"i":"1"}`, `{"i":01}`, `{"i":-}`, `{"i":9223372036854775808}`,
	`{"i64":-9223372036854775809}`, `{"b":1}`, `{"b":"true"}`, `{"in":[]}`, `{"l":{}}`, `{"l":[1]}`, `{"l":[{},]}`, `{"p":"x"}`,
	`{"s":"a","s":"b"}`, `{"S":"x"}`, `{"s":"a","S":"b"}`, "{\"\u017fp\":\"x\"}", `{"I64":1}`, "{\"ſ\":\"long s\"}",
	`{"s":"\x"}`, `{"s":"\u12"}`, `{"s":"\u12G4"}`, "{\"s\":\"tab\there\"}", `{"s":"unterminated}`,
	`{"raw":}`, `{"raw":tru}`, `{"raw":nul}`, `{"raw":[1,]}`, `{"raw":{"a"}}`, `{"raw":{"a":1,}}`, `{"raw":.5}`, `{"raw":1.}`, `{"raw":1e}`, `{"raw":+1}`,
	`{"x":` + strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1) + `}`,
}

func compare(t *testing.T, data []byte, fast bool) {
	t.Helper()
	var want value
	werr := json.Unmarshal(data, &want)
	var r Reader
	var got value
	if ok := Read(&r, data, &got, readValue); ok != fast {
		t.Errorf("%q: Read: got %v, want %v", data, ok, fast)
	} else if ok && (werr != nil || !reflect.DeepEqual(got, want)) {
		t.Errorf("%q:\n got %+v\nwant %+v, %v", data, got, want, werr)
	}
	var dec value
	if err := Decode(&r, data, &dec, readValue); fmt.Sprint(err) != fmt.Sprint(werr) || werr == nil && !reflect.DeepEqual(dec, want) {
		t.Errorf("%q: Decode: got %+v, %v\nwant %+v, %v", data, dec, err, want, werr)
	}
}

func TestRead(t *testing.T) {
	for _, s := range read {
		compare(t, []byte(s), true)
	}
}

func TestGiveUp(t *testing.T) {
	for _, s := range givenUp {
		compare(t, []byte(s), false)
	}
}

// TestReaderReuse: a Reader reused on a text with escapes after one without
// reads each whole.
func TestReaderReuse(t *testing.T) {
	var r Reader
	for _, s := range []string{`{"s":"\n\n"}`, `{"s":"ab"}`, `{"s":"é\t"}`} {
		var v, want value
		if err := Decode(&r, []byte(s), &v, readValue); err != nil || json.Unmarshal([]byte(s), &want) != nil || v.S != want.S {
			t.Errorf("%s: got %q, %v, want %q", s, v.S, err, want.S)
		}
	}
}

// FuzzRead checks the readers against encoding/json on every kind of field.
func FuzzRead(f *testing.F) {
	for _, s := range append(read, givenUp...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var want value
		werr := json.Unmarshal(data, &want)
		var r Reader
		var got value
		if Read(&r, data, &got, readValue) && (werr != nil || !reflect.DeepEqual(got, want)) {
			t.Fatalf("%q:\n got %+v\nwant %+v, %v", data, got, want, werr)
		}
		var dec value
		if err := Decode(&r, data, &dec, readValue); fmt.Sprint(err) != fmt.Sprint(werr) || werr == nil && !reflect.DeepEqual(dec, want) {
			t.Fatalf("%q: Decode: got %+v, %v\nwant %+v, %v", data, dec, err, want, werr)
		}
	})
}

// TestDecodeHostile: what a hostile or broken stream could send decodes as
// encoding/json decodes it, or fails as it fails, without exhausting the
// stack: nesting far past MaxDepth (the reader gives up at MaxDepth,
// encoding/json refuses past its own limit), a 4 MiB string of escapes, a
// number too large for the field.
func TestDecodeHostile(t *testing.T) {
	for name, text := range map[string]string{
		"nested 200,000 deep":   `{"x":` + strings.Repeat("[", 200_000) + strings.Repeat("]", 200_000) + `}`,
		"nested objects":        strings.Repeat(`{"l":[`, 50_000) + strings.Repeat(`]}`, 50_000),
		"4 MiB of escapes":      `{"s":"` + strings.Repeat(`\u00e9\n\"`, 4<<20/14) + `"}`,
		"integer past int64":    `{"i64":92233720368547758070}`,
		"a key of 1 MiB":        `{"` + strings.Repeat("k", 1<<20) + `":1}`,
		"unterminated escapes":  `{"s":"` + strings.Repeat(`\`, 1001) + `"}`,
		"lone surrogates 10000": `{"s":"` + strings.Repeat(`\ud800`, 10_000) + `"}`,
	} {
		t.Run(name, func(t *testing.T) {
			var got, want value
			var r Reader
			err := Decode(&r, []byte(text), &got, readValue)
			werr := json.Unmarshal([]byte(text), &want)
			if fmt.Sprint(err) != fmt.Sprint(werr) {
				t.Fatalf("error %v, encoding/json's %v", err, werr)
			}
			if err == nil && !reflect.DeepEqual(got, want) {
				t.Error("decoded differently from encoding/json")
			}
		})
	}
}
