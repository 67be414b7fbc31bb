package xlsx

import (
	"archive/zip"
	"errors"
	"strconv"
	"strings"
)

// sharedStrings is the workbook's shared-string table, its texts end to end
// in one buffer.
type sharedStrings struct {
	data []byte
	end  []uint32 // string i is data[end[i-1]:end[i]]
}

func (s *sharedStrings) get(i int) (string, bool) {
	if s == nil || i < 0 || i >= len(s.end) {
		return "", false
	}
	start := uint32(0)
	if i > 0 {
		start = s.end[i-1]
	}
	return string(s.data[start:s.end[i]]), true
}

// readSharedStrings reads the shared-string table: each <si>'s text, the
// runs of rich text joined, phonetic guides (<rPh>) left out.
func readSharedStrings(zf *zip.File, name string, lim Limits) (*sharedStrings, error) {
	rc, err := zf.Open()
	if err != nil {
		return nil, damaged(name, "its shared strings cannot be read", err)
	}
	defer rc.Close()
	x, err := newXMLScanner(rc, int(min(lim.MaxSharedStrings, 1<<30)))
	if err != nil {
		return nil, damaged(name, "its shared strings cannot be read", err)
	}
	s := &sharedStrings{}
	var (
		inSI, inT bool
		phonetic  int
		start     int
	)
	for {
		x.wantText = inT
		if !x.next() {
			break
		}
		switch x.kind {
		case tokStart:
			switch string(x.name) {
			case "si":
				inSI, start = true, len(s.data)
			case "rPh":
				phonetic++
				inT = false
			case "t":
				inT = inSI && phonetic == 0
			}
		case tokEnd:
			switch string(x.name) {
			case "si":
				if !inSI {
					continue
				}
				inSI, inT = false, false
				if text := unescapeOOXML(string(s.data[start:])); len(text) != len(s.data)-start {
					s.data = append(s.data[:start], text...)
				}
				s.end = append(s.end, uint32(len(s.data)))
			case "rPh":
				phonetic = max(0, phonetic-1)
			case "t":
				inT = false
			}
		case tokText:
			if inT {
				s.data = append(s.data, x.text...)
				if int64(len(s.data)) > lim.MaxSharedStrings {
					return nil, userError(ErrTooLarge, "%s holds more than %s of distinct texts, over the limit", name, byteSize(uint64(lim.MaxSharedStrings)))
				}
			}
		}
	}
	if x.err != nil {
		if x.err == errTextTooLong {
			return nil, userError(ErrTooLarge, "%s holds more than %s of distinct texts, over the limit", name, byteSize(uint64(lim.MaxSharedStrings)))
		}
		return nil, damaged(name, "its shared strings cannot be read", x.err)
	}
	return s, nil
}

// unescapeOOXML decodes the _xHHHH_ escapes OOXML uses for characters XML
// cannot hold (_x000D_ is a carriage return); _x005F_ escapes an underscore.
func unescapeOOXML(s string) string {
	if !strings.Contains(s, "_x") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '_' && i+6 < len(s) && s[i+1] == 'x' && s[i+6] == '_' {
			if n, err := strconv.ParseUint(s[i+2:i+6], 16, 16); err == nil {
				b.WriteRune(rune(n))
				i += 6
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

var errSharedString = errors.New("a cell refers to a shared string that does not exist")
