package worker

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"datachat"
)

func deepJSON(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

// TestCheckJSONDepth: the JSON depth check reads the file as DuckDB's
// read_json does — strings with escapes, several top-level values, no
// comments — so nothing hides nesting from it, and a bracket that closes
// nothing is an error, not depth −1.
func TestCheckJSONDepth(t *testing.T) {
	tooDeep := deepJSON(maxJSONDepth + 1)
	for _, tc := range []struct {
		name, doc, want string // want "": accepted
	}{
		{"records", `[{"a": 1, "b": [1, 2, {"c": "]]]"}]}, {"a": 2}]`, ""},
		{"NDJSON", "{\"a\": 1}\n{\"a\": [2]}\r\n{\"a\": \"\\\"[[\"}\n", ""},
		{"adjacent values", `{"a": 1}{"a": 2}[1]`, ""},
		{"DuckDB's extras", `[{"a": NaN, "b": -Infinity, "c": 1e999, "d": nan}]`, ""},
		{"a BOM", "\xef\xbb\xbf[{\"a\": 1}]", ""},
		{"at the limit", deepJSON(maxJSONDepth), ""},
		{"escaped quotes and backslashes", `[{"a": "\\", "b": "\\\"", "c": "x\"y"}]`, ""},
		{"too deep", tooDeep, "more than 1000 levels deep"},
		{"too deep in the second record", "{\"a\": 1}\n{\"a\": " + tooDeep + "}\n", "more than 1000 levels deep"},
		// Evasions of the byte counter it replaces.
		{"a leading ]", "]" + deepJSON(maxJSONDepth+1), "a ] that closes nothing"},
		{"leading ]s", strings.Repeat("]", 5000) + deepJSON(maxJSONDepth+4000), "a ] that closes nothing"},
		{"a quote in a block comment", `/* " */ ` + tooDeep + ` /* " */`, "comments"},
		{"a quote in a line comment", "// \"\n" + tooDeep + "\n// \"\n", "comments"},
		{"a comment hiding closers", "[/* ]]] */]", "comments"},
		{"a hash comment", "# \"\n" + tooDeep, "unexpected character"},
		{"a single-quoted string", `[{'a': "[[["}]`, "unexpected character"},
		{"mismatched closer", `[{"a": 1]}`, "a ] where } closes"},
		{"unclosed", `[{"a": 1}`, "ends inside an array"},
		{"unclosed string", `[{"a": "x`, "ends inside a string"},
		{"a closer after the end", `{"a": 1}}`, "a } that closes nothing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "f.json")
			if err := os.WriteFile(p, []byte(tc.doc), 0o644); err != nil {
				t.Fatal(err)
			}
			err := checkJSONDepth(p, "f.json")
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var de *datachat.Error
			if err == nil || !errors.As(err, &de) || de.Code != datachat.EINVALID || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "f.json") {
				t.Fatalf("got %v, want EINVALID with %q", err, tc.want)
			}
		})
	}
}

// TestJSONAsDuckDBReads holds scanJSON to what DuckDB's own read_json
// accepts (format auto, as ingest reads JSON): each document DuckDB reads,
// scanJSON reads; each it refuses for its structure (comments, quotes,
// stray or wrong closers), scanJSON refuses too.
func TestJSONAsDuckDBReads(t *testing.T) {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	dir := t.TempDir()
	for i, tc := range []struct {
		doc         string
		duckdbReads bool
	}{
		{`[{"a": 1}, {"a": 2}]`, true},
		{"{\"a\": 1}\n{\"a\": 2}\r\n", true},
		{`{"a": [1,2]}{"a": [3]}`, true},
		{`[{"a": NaN}, {"a": -Infinity}, {"a": nan}, {"a": 1e999}]`, true},
		{"\f{\"a\": 1}", true},
		{"\xef\xbb\xbf[{\"a\": 1}]", true},
		{`[{"a": "\/ # /* ] \" ["}]`, true},
		{"// c\n[{\"a\": 1}]", false},
		{"/* c */ [{\"a\": 1}]", false},
		{"[{\"a\": 1} /* ] */, {\"a\": 2}]", false},
		{"{\"a\": 1}\n// c\n{\"a\": 2}\n", false},
		{"# c\n[{\"a\": 1}]", false},
		{`[{'a': 1}]`, false},
		{"]{\"a\": 1}", false},
		{"[{\"a\": 1}]]]]", false},
		{"{\"a\": 1}\n]\n{\"a\": 2}\n", false},
		{`[{"a": 1]}`, false},
	} {
		p := filepath.Join(dir, fmt.Sprintf("f%d.json", i))
		if err := os.WriteFile(p, []byte(tc.doc), 0o644); err != nil {
			t.Fatal(err)
		}
		var n int
		derr := db.QueryRow("SELECT count(*) FROM read_json(" + datachat.QuoteLiteral(p) + ", format = 'auto')").Scan(&n)
		if (derr == nil) != tc.duckdbReads {
			t.Errorf("%q: DuckDB read it: %v (%v); the test expects %v", tc.doc, derr == nil, derr, tc.duckdbReads)
		}
		_, serr := scanJSON(strings.NewReader(tc.doc), "f", maxJSONDepth)
		if (serr == nil) != tc.duckdbReads {
			t.Errorf("%q: scanJSON: %v; DuckDB reads it: %v", tc.doc, serr, tc.duckdbReads)
		}
	}
}

// FuzzJSONDepth checks the tokenizer against encoding/json's: on input
// encoding/json reads to its end as a stream of values, scanJSON agrees
// and finds the same deepest nesting; what scanJSON refuses as unbalanced,
// encoding/json refuses too.
func FuzzJSONDepth(f *testing.F) {
	for _, s := range []string{`[{"a": [1, {"b": "]"}]}]`, "{\"a\":1}\n{\"b\":[2]}", `"\\\""`, "]", "[}", `{"a": "\u005d"}`, deepJSON(20), "[/* */]"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		got, err := scanJSON(bytes.NewReader(doc), "f", 64)
		dec := json.NewDecoder(bytes.NewReader(doc))
		depth, want := 0, 0
		var jerr error
		for {
			tok, e := dec.Token()
			if e == io.EOF {
				break
			}
			if e != nil {
				jerr = e
				break
			}
			switch tok {
			case json.Delim('['), json.Delim('{'):
				depth++
				want = max(want, depth)
			case json.Delim(']'), json.Delim('}'):
				depth--
			}
		}
		if jerr == nil && depth == 0 && want <= 64 {
			if err != nil {
				t.Fatalf("%q: encoding/json reads it (depth %d), scanJSON refuses: %v", doc, want, err)
			}
			if got != want {
				t.Fatalf("%q: depth %d, encoding/json %d", doc, got, want)
			}
		}
		if err != nil && strings.Contains(err.Error(), "closes nothing") && jerr == nil && depth == 0 {
			t.Fatalf("%q: scanJSON finds a stray closer, encoding/json reads it", doc)
		}
	})
}
