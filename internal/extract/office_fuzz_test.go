package extract

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// FuzzOfficeKind: any file claiming to be OLE2 or a zip archive is told apart
// in one pass without a panic: one of the stream names it holds (in a
// directory entry), and a zip's Office kind.
func FuzzOfficeKind(f *testing.F) {
	entry := func(name string) []byte {
		e := make([]byte, oleDirEntry)
		for i, r := range name {
			e[2*i] = byte(r)
		}
		e[64] = byte(2 * (len(name) + 1))
		return e
	}
	f.Add(append(append(slices.Clone(oleMagic), make([]byte, 504)...), entry("EncryptedPackage")...))
	f.Add(append(append(slices.Clone(oleMagic), make([]byte, 504)...), entry("Workbook")...))
	f.Add([]byte("PK\x03\x04junk"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		kind := oleStream(r, int64(len(b)))
		if kind != "" && !slices.Contains(oleStreams, kind) {
			t.Fatalf("oleStream gave %q", kind)
		}
		if d := oleKind(r, int64(len(b)), ".docx"); !strings.HasPrefix(d, " (") {
			t.Fatalf("oleKind gave %q", d)
		}
		if k := officeZip(r, int64(len(b))); k != "" && k != "xl" && k != "ppt" {
			t.Fatalf("officeZip gave %q", k)
		}
	})
}
