package yamlsafe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"datachat/internal/testfiles"
)

type dictionary struct {
	Notes    *string                   `json:"notes,omitempty" yaml:"notes,omitempty"`
	Datasets map[string]datasetEntries `json:"datasets,omitempty" yaml:"datasets,omitempty"`
}

type datasetEntries struct {
	Description *string           `json:"description,omitempty" yaml:"description,omitempty"`
	Columns     map[string]string `json:"columns,omitempty" yaml:"columns,omitempty"`
}

var dict = Options{What: "the dictionary file", Strict: true}

func decodeDict(t *testing.T, doc string) (dictionary, error) {
	t.Helper()
	var d dictionary
	err := Unmarshal(context.Background(), []byte(doc), &d, dict)
	if err != nil {
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("error %T %v is not a *yamlsafe.Error", err, err)
		}
	}
	return d, err
}

func wantKind(t *testing.T, err error, kind string, contains ...string) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Kind != kind {
		t.Fatalf("got %v (%T), want a %q error", err, err, kind)
	}
	for _, s := range contains {
		if !strings.Contains(e.Error(), s) {
			t.Errorf("message %q lacks %q", e.Error(), s)
		}
	}
	return e
}

func TestDecodes(t *testing.T) {
	d, err := decodeDict(t, "notes: |\n  Revenue excludes refunds.\ndatasets:\n  orders:\n    description: One row per order.\n    columns:\n      price: In euros.\n")
	if err != nil {
		t.Fatal(err)
	}
	if *d.Notes != "Revenue excludes refunds.\n" || *d.Datasets["orders"].Description != "One row per order." || d.Datasets["orders"].Columns["price"] != "In euros." {
		t.Errorf("got %+v", d)
	}
	// JSON, with a BOM, tab indentation and a surrogate pair yaml.v3 refuses.
	d, err = decodeDict(t, "\xef\xbb\xbf{\n\t\"notes\": \"smile \\ud83d\\ude00\",\n\t\"datasets\": {\"orders\": {\"columns\": {\"price\": \"x\"}}}\n}")
	if err != nil {
		t.Fatal(err)
	}
	if *d.Notes != "smile 😀" || d.Datasets["orders"].Columns["price"] != "x" {
		t.Errorf("JSON: got %+v", d)
	}
	// YAML with a BOM.
	if d, err = decodeDict(t, "\xef\xbb\xbfnotes: x\n"); err != nil || *d.Notes != "x" {
		t.Errorf("YAML with a BOM: %+v, %v", d, err)
	}
	// An empty document leaves the value alone.
	keep := "kept"
	d = dictionary{Notes: &keep}
	if err := Unmarshal(context.Background(), []byte("# nothing\n"), &d, dict); err != nil || *d.Notes != "kept" {
		t.Errorf("empty document: %+v, %v", d, err)
	}
	// Anchors and merge keys used with measure decode.
	d, err = decodeDict(t, "datasets:\n  a: &base {description: shared, columns: {id: The key.}}\n  b:\n    <<: *base\n    columns: {id: Another key.}\n")
	if err != nil {
		t.Fatal(err)
	}
	if *d.Datasets["b"].Description != "shared" || d.Datasets["b"].Columns["id"] != "Another key." {
		t.Errorf("merge: got %+v", d.Datasets["b"])
	}
}

func TestRedTeamBombs(t *testing.T) {
	for _, tc := range []struct {
		name, doc, kind string
	}{
		{"billion laughs", "notes: x\n" + testfiles.YAMLLaughs(9, 9), TooExpanded},
		{"merge-key fan-out", testfiles.YAMLMerges(9, 9), TooExpanded},
		{"merge keys, 1,181 bytes", testfiles.YAMLMerges(20, 9), TooExpanded},
		{"deep flow 40,000", testfiles.YAMLDeepFlow(40_000), TooDeep},
		{"deep block 40,000", testfiles.YAMLDeepBlock(40_000), TooDeep},
		{"deep flow 9,999 (under yaml.v3's own limit)", testfiles.YAMLDeepFlow(9_999), TooDeep},
		{"deep JSON 40,000", "{\"notes\": " + strings.Repeat("[", 40_000) + strings.Repeat("]", 40_000) + "}", TooDeep},
		{"deep JSON 5,000", "{\"notes\": " + strings.Repeat("[", 5_000) + strings.Repeat("]", 5_000) + "}", TooDeep},
		{"1 MiB of values", testfiles.YAMLDenseList(520_000), TooMany},
		{"many keys in one mapping", testfiles.YAMLManyKeys(10_000), TooManyKeys},
		{"self-referencing alias", "notes: x\nx: &a [*a, *a]\n", TooExpanded},
		{"self-referencing merge", "notes: x\nx: &a {<<: *a, y: 1}\n", TooExpanded},
		{"self-referencing merge list", "datasets:\n  t: &a\n    <<: [*a, *a]\n    description: x\n", TooExpanded},
		{"alias chain deeper than 64", aliasChain(100), TooDeep},
		{"laughs through maps", mapLaughs(10, 10), TooExpanded},
		{"two documents", "notes: a\n---\nnotes: b\n", Documents},
		{"oversized", "notes: " + strings.Repeat("x", DefaultMaxBytes), TooLarge},
		{"unknown anchor", "notes: *nope\n", Syntax},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, err := decodeDict(t, tc.doc)
			wantKind(t, err, tc.kind, "the dictionary file")
			t.Logf("%d bytes: %v in %v", len(tc.doc), err.Error()[:min(len(err.Error()), 160)], time.Since(start))
		})
	}
}

// aliasChain is n anchors each a one-item sequence of the one before: a
// nesting n deep that the text writes one level deep.
func aliasChain(n int) string {
	var b strings.Builder
	b.WriteString("notes: x\nx:\n  - &a0 [y]\n")
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, "  - &a%d [*a%d]\n", i, i-1)
	}
	return b.String()
}

// mapLaughs is a billion laughs of mappings.
func mapLaughs(levels, fan int) string {
	var b strings.Builder
	b.WriteString("notes: x\nx:\n  l0: &l0 {k: v}\n")
	for l := 1; l < levels; l++ {
		fmt.Fprintf(&b, "  l%d: &l%d {", l, l)
		for i := range fan {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "k%d: *l%d", i, l-1)
		}
		b.WriteString("}\n")
	}
	return b.String()
}

func TestLimitsBoundaries(t *testing.T) {
	nested := func(n int) string { return strings.Repeat("[", n) + "1" + strings.Repeat("]", n) }
	var v any
	o := Options{What: "x"}
	ctx := context.Background()
	// The top level is level 1: 64 sequences nest 64 deep.
	for _, doc := range []string{nested(DefaultMaxDepth), strings.Repeat("- ", DefaultMaxDepth) + "x", "a: " + nested(DefaultMaxDepth-1)} {
		if err := Unmarshal(ctx, []byte(doc), &v, o); err != nil {
			t.Errorf("%d levels refused: %v", DefaultMaxDepth, err)
		}
	}
	for _, doc := range []string{nested(DefaultMaxDepth + 1), strings.Repeat("- ", DefaultMaxDepth+1) + "x", "a: " + nested(DefaultMaxDepth)} {
		wantKind(t, Unmarshal(ctx, []byte(doc), &v, o), TooDeep, "more than 64 levels deep", "flatten it")
	}
	if err := Unmarshal(ctx, []byte(aliasChain(60)), &v, o); err != nil {
		t.Errorf("a chain of 60 aliases: %v", err)
	}
	// Aliases: 8^5 = 32,768 strings beside 2,000 written out, then 8^6 =
	// 262,144 (past our limit), and 8^5 alone (past yaml.v3's: 99 in 100
	// values from aliases).
	written := "b: " + strings.TrimPrefix(testfiles.YAMLDenseList(2000), "notes: ")
	if err := Unmarshal(ctx, []byte(written+testfiles.YAMLLaughs(5, 8)), &v, o); err != nil {
		t.Errorf("laughs(5, 8): %v", err)
	}
	wantKind(t, Unmarshal(ctx, []byte(written+testfiles.YAMLLaughs(6, 8)), &v, o), TooExpanded, "more than 200000 values", "aliases (*name)", "line 7")
	wantKind(t, Unmarshal(ctx, []byte(testfiles.YAMLLaughs(5, 8)), &v, o), TooExpanded, "takes nearly all its values from aliases")
	// Keys: 7,000 in one mapping are checked, 7,100 are too many.
	if err := Unmarshal(ctx, []byte(testfiles.YAMLManyKeys(7_000)), &v, o); err != nil {
		t.Errorf("7,000 keys: %v", err)
	}
	wantKind(t, Unmarshal(ctx, []byte(testfiles.YAMLManyKeys(7_100)), &v, o), TooManyKeys, "about 7071 keys in one mapping")
	// Values: the count stops just past the limit.
	small := Options{What: "x", MaxValues: 10}
	if err := Unmarshal(ctx, []byte("[1,2,3,4]"), &v, small); err != nil {
		t.Errorf("9 values: %v", err)
	}
	wantKind(t, Unmarshal(ctx, []byte("[1,2,3,4,5,6]"), &v, small), TooMany, "more than 10 values")
	wantKind(t, Unmarshal(ctx, []byte("a: 1\nb: 2\nc: 3\nd: 4\ne: 5\nf: 6\n"), &v, small), TooMany)
	// Size.
	wantKind(t, Unmarshal(ctx, []byte(strings.Repeat("a", 101)), &v, Options{What: "x", MaxBytes: 100}), TooLarge, "101 bytes, more than the 100 bytes")
}

// TestProse: a dictionary near the size limit written as prose is
// accepted; words inside a scalar do not count as values.
func TestProse(t *testing.T) {
	line := "Revenue is quantity times unit price, and refunded orders do not count: see the fiscal-year rule.\n"
	var b strings.Builder
	b.WriteString("notes: |\n")
	for b.Len() < DefaultMaxBytes-200 {
		b.WriteString("  " + line)
	}
	d, err := decodeDict(t, b.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(*d.Notes) < DefaultMaxBytes/2 {
		t.Errorf("notes of %d bytes", len(*d.Notes))
	}
}

func TestTags(t *testing.T) {
	var v map[string]any
	doc := "bin: !!binary aGVsbG8=\nset: !!set {a, b}\nwhen: 2024-01-31\nwhen2: !!timestamp 2024-01-31T10:00:00Z\nstr: !!str 12\nomap: !!omap [a: 1, b: 2]\nlocal: !thing x\nnum: 0x10\nyes: yes\n"
	if err := Unmarshal(context.Background(), []byte(doc), &v, Options{}); err != nil {
		t.Fatal(err)
	}
	if v["bin"] != "hello" || v["when"] != "2024-01-31" || v["str"] != "12" || v["local"] != "x" || v["num"] != 16 || v["yes"] != "yes" {
		t.Errorf("got %#v", v)
	}
	if _, ok := v["when2"].(time.Time); !ok {
		t.Errorf("an explicit !!timestamp: got %#v", v["when2"])
	}
	// Tags on the dictionary's text fields: !!binary decodes, a mapping
	// where text is expected does not.
	d, err := decodeDict(t, "notes: !!binary aGVsbG8=\n")
	if err != nil || *d.Notes != "hello" {
		t.Errorf("!!binary notes: %v %v", d.Notes, err)
	}
	_, err = decodeDict(t, "notes: !!set {a, b}\n")
	wantKind(t, err, Shape, "line 1")
}

func TestInvalidUTF8(t *testing.T) {
	for _, tc := range []struct {
		doc, want string
		path      []string
		key       bool
	}{
		{"notes: caf\xe9\n", "the value of notes (line 1)", []string{"notes"}, false},
		{"datasets:\n  orders:\n    columns:\n      price: \"\xff\xfe\"\n", "the value of datasets.orders.columns.price (line 4)", []string{"datasets", "orders", "columns", "price"}, false},
		{"datasets:\n  orders:\n    columns:\n      pr\xc3ice: x\n", "the key datasets.orders.columns.pr\ufffdice (line 4)", []string{"datasets", "orders", "columns", "pr\ufffdice"}, true},
		{"notes: |\n  line one\n  line \xc0\xaf two\n", "the value of notes (line 3)", []string{"notes"}, false},
		{"{\"datasets\": {\"t\": {\"description\": \"\xed\xa0\x80\"}}}", "the value of datasets.t.description (line 1)", []string{"datasets", "t", "description"}, false},
		{"x:\n  - a\n  - b\xf8\n", "the value of x[1] (line 3)", []string{"x", "[1]"}, false},
	} {
		var v any
		err := Unmarshal(context.Background(), []byte(tc.doc), &v, dict)
		e := wantKind(t, err, InvalidUTF8, "the dictionary file is not valid UTF-8 text", tc.want, "save the file as UTF-8")
		if !slices.Equal(e.Path, tc.path) || e.Key != tc.key {
			t.Errorf("%q: path %q key %v, want %q %v", tc.doc, e.Path, e.Key, tc.path, tc.key)
		}
	}
	// Not even YAML once cleaned: the line and column.
	var v any
	wantKind(t, Unmarshal(context.Background(), []byte("a: [\n b: \xff"), &v, dict), InvalidUTF8, "(line 2, column 5)")
}

func TestStrict(t *testing.T) {
	_, err := decodeDict(t, "notes: x\ndatasets:\n  orders:\n    colums: {a: b}\n")
	e := wantKind(t, err, UnknownField, `line 4: unknown field "colums" in datasets.orders (the fields there are columns, description)`)
	if e.Line != 4 || !slices.Equal(e.Path, []string{"datasets", "orders", "colums"}) {
		t.Errorf("line %d path %q", e.Line, e.Path)
	}
	_, err = decodeDict(t, "note: x\n")
	wantKind(t, err, UnknownField, `unknown field "note" (the fields there are datasets, notes)`)
	_, err = decodeDict(t, `{"notes": "x", "extra": 1}`)
	wantKind(t, err, UnknownField, `unknown field "extra"`)
	// Through a merge key and an alias.
	_, err = decodeDict(t, "datasets:\n  a: &x {descriptio: y}\n")
	wantKind(t, err, UnknownField, `unknown field "descriptio"`)
	_, err = decodeDict(t, "x: &x {bad: 1}\n")
	wantKind(t, err, UnknownField, `unknown field "x"`)
	_, err = decodeDict(t, "datasets:\n  a: {description: y}\n  b:\n    <<: {wrong: z}\n")
	wantKind(t, err, UnknownField, `unknown field "wrong" in datasets.b`)
	// Without Strict, unknown keys are ignored.
	var d dictionary
	if err := Unmarshal(context.Background(), []byte("note: x\n"), &d, Options{}); err != nil {
		t.Errorf("not strict: %v", err)
	}
	// Shapes.
	_, err = decodeDict(t, "notes: [a]\n")
	wantKind(t, err, Shape, "line 1: a list where text is expected")
	_, err = decodeDict(t, `{"notes": ["a"]}`)
	wantKind(t, err, Shape, "notes holds a JSON array where text is expected")
}

func TestSyntax(t *testing.T) {
	for _, doc := range []string{"a: [1, 2\n", "a: b: c\n", "\t- x\n", "a: 'open\n", "{\"a\": 1,}x"} {
		var v any
		err := Unmarshal(context.Background(), []byte(doc), &v, dict)
		wantKind(t, err, Syntax, "the dictionary file is not valid YAML or JSON")
	}
}

func TestContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var v any
	err := Unmarshal(ctx, []byte("a: 1\n"), &v, dict)
	e := wantKind(t, err, TooSlow, "reading the dictionary file was stopped")
	if !errors.Is(e, context.Canceled) {
		t.Errorf("%v does not wrap context.Canceled", e)
	}
	// A walk long enough to look at the deadline; a timeout that has passed.
	err = Unmarshal(context.Background(), []byte(testfiles.YAMLDenseList(30_000)), &v, Options{What: "x", Timeout: time.Nanosecond})
	wantKind(t, err, TooSlow, "x took longer than 1ns to read")
}

type panicky struct{}

func (*panicky) UnmarshalYAML(*yaml.Node) error { panic("boom") }

func TestPanicRecovered(t *testing.T) {
	var v struct {
		P panicky `yaml:"p"`
	}
	err := Unmarshal(context.Background(), []byte("p: 1\n"), &v, Options{What: "x"})
	wantKind(t, err, Crash, "x could not be read", "boom")
}

// TestCountValuesBound checks countValues against the trees yaml.v3
// builds for the shapes that put the most nodes on the fewest bytes.
func TestCountValuesBound(t *testing.T) {
	for _, doc := range []string{"a:\nb:\nc:\n", "- \n- \n- \n", "? \n? \n? \n", "[a: b, c: d, e]", "{a, b, c}", "- - - - x\n", "a: &x 1\nb: *x\nc: *x\n", "? [a]\n: ? b\n  : c\n", "[[],[],{}]", "'a': 1\n\"b\":2\n", "{\"a\":1,\"b\":[1,2]}", "!!str a: !!int 1\n", "- ? a\n  : b\n- c"} {
		checkBound(t, []byte(doc))
	}
}

func checkBound(t *testing.T, doc []byte) {
	t.Helper()
	var n yaml.Node
	if yaml.Unmarshal(doc, &n) != nil {
		return
	}
	nodes := 0
	stack := []*yaml.Node{&n}
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		nodes++
		stack = append(stack, x.Content...)
	}
	if c := countValues(doc, 1<<30); nodes > 2*c+2 {
		t.Errorf("%q: %d nodes, countValues %d", doc, nodes, c)
	}
}

func FuzzCountValues(f *testing.F) {
	for _, s := range []string{"a:\nb:\n", "? \n? \n", "[a: b, c]", "- - x", testfiles.YAMLLaughs(3, 3), testfiles.YAMLMerges(3, 3)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		if len(doc) > 4096 {
			return
		}
		checkBound(t, doc)
	})
}

// FuzzUnmarshal: whatever the bytes, Unmarshal returns nil or an *Error,
// and what it accepts decodes within the expansion limit.
func FuzzUnmarshal(f *testing.F) {
	for _, s := range []string{"notes: x\n", testfiles.YAMLLaughs(4, 4), testfiles.YAMLMerges(4, 4), testfiles.YAMLDeepFlow(70), testfiles.YAMLDeepBlock(70), "a: &a [*a]", "{\"a\": [1, {\"b\": null}]}", "x: !!binary aGk=\n", "a: caf\xe9"} {
		f.Add([]byte(s))
	}
	small := Options{What: "x", MaxExpanded: 5000, MaxKeyPairs: 100_000}
	f.Fuzz(func(t *testing.T, doc []byte) {
		var d dictionary
		err := Unmarshal(context.Background(), doc, &d, Options{What: "x", Strict: true, MaxExpanded: 5000})
		var e *Error
		if err != nil && !errors.As(err, &e) {
			t.Fatalf("%T %v", err, err)
		}
		var v any
		if err := Unmarshal(context.Background(), doc, &v, small); err == nil {
			if n := countAny(v, 10*small.MaxExpanded); n > small.MaxExpanded {
				t.Fatalf("accepted a document of %d values (limit %d)", n, small.MaxExpanded)
			}
		} else if !errors.As(err, &e) {
			t.Fatalf("%T %v", err, err)
		}
	})
}

// countAny counts the values of a decoded tree, stopping past limit.
func countAny(v any, limit int) int {
	n := 0
	stack := []any{v}
	for len(stack) > 0 && n <= limit {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		n++
		rv := reflect.ValueOf(x)
		switch rv.Kind() {
		case reflect.Slice:
			if rv.Type().Elem().Kind() == reflect.Uint8 {
				continue
			}
			for i := range rv.Len() {
				stack = append(stack, rv.Index(i).Interface())
			}
		case reflect.Map:
			for _, k := range rv.MapKeys() {
				stack = append(stack, rv.MapIndex(k).Interface())
			}
		}
	}
	return n
}

func TestCheckJSONText(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		path []string // nil: accepted
		key  bool
	}{
		{`{"a": "caf\u00e9 \ud83d\ude00", "b": ["x", {"c": "\\udce9"}]}`, nil, false},
		{"{\"a\": \"caf\xe9\"}", []string{"a"}, false},
		{`{"a": {"b": "\udce9"}}`, []string{"a", "b"}, false},
		{`{"a": ["x", "y", "\ud83d"]}`, []string{"a", "[2]"}, false},
		{`{"a": "\ud83d\u0041"}`, []string{"a"}, false},
		{`{"a": "\ud83dx"}`, []string{"a"}, false},
		{"{\"a\": 1, \"k\xff\": 2}", []string{"k\ufffd"}, true},
		{"[\"\xff\"]", []string{"[0]"}, false},
		{"\"\xff", []string{}, false},
		{"\"", nil, false},
		{`{"a": "\u`, nil, false},
	} {
		err := CheckJSONText([]byte(tc.doc), "the body")
		if tc.path == nil {
			if err != nil {
				t.Errorf("%q: %v", tc.doc, err)
			}
			continue
		}
		e := wantKind(t, err, InvalidUTF8, "the body is not valid UTF-8 text")
		if !slices.Equal(e.Path, tc.path) || e.Key != tc.key {
			t.Errorf("%q: path %q key %v, want %q %v", tc.doc, e.Path, e.Key, tc.path, tc.key)
		}
	}
}

// FuzzCheckJSONText: on any bytes CheckJSONText ends without panicking, and
// on a valid JSON document it refuses exactly what encoding/json would
// change (invalid UTF-8 or lone surrogates become U+FFFD).
func FuzzCheckJSONText(f *testing.F) {
	for _, s := range []string{`{"a": "\ud83d\ude00"}`, "[\"\xff\"]", `{"a": "\udce9"}`, `["\\", "\"", 1]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		err := CheckJSONText(doc, "x")
		if !json.Valid(doc) {
			return
		}
		var v any
		if json.Unmarshal(doc, &v) != nil {
			return
		}
		changed := false
		stack := []any{v}
		for len(stack) > 0 {
			x := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			switch x := x.(type) {
			case string:
				changed = changed || strings.ContainsRune(x, utf8.RuneError)
			case []any:
				stack = append(stack, x...)
			case map[string]any:
				for k, e := range x {
					changed = changed || strings.ContainsRune(k, utf8.RuneError)
					stack = append(stack, e)
				}
			}
		}
		// A U+FFFD written in the document (raw or \ufffd) is text, not a
		// change: only check that what is refused was changed.
		if err != nil && !changed {
			t.Fatalf("refused %q, which encoding/json reads unchanged: %v", doc, err)
		}
		if err == nil && changed && !bytes.Contains(doc, []byte("\xef\xbf\xbd")) && !bytes.Contains(bytes.ToLower(doc), []byte(`\ufffd`)) {
			t.Fatalf("accepted %q, which encoding/json changes", doc)
		}
	})
}
