package chroma

import (
	"encoding/json"
	"strings"
	"testing"

	"datachat/internal/retrieval"
)

func TestCollectionName(t *testing.T) {
	hashed := func(s string) bool { return strings.HasPrefix(s, "datachat_") && len(s) == len("datachat_")+64 }
	for _, tc := range []struct {
		conv   string
		direct bool
	}{
		{"0198c0de-7d6e-7a1b-9a4e-1c2d3e4f5a6b", true},
		{"conv_1.2", true},
		{"a", true},
		{"", false},
		{"has space", false},
		{"ends-", false},
		{"dots..dots", false},
		{"ünïcode", false},
		{"x/../y", false},
		{strings.Repeat("a", 600), false},
	} {
		got := CollectionName(tc.conv)
		if tc.direct && got != "datachat-"+tc.conv || !tc.direct && !hashed(got) {
			t.Errorf("CollectionName(%.20q) = %s", tc.conv, got)
		}
		if !validName(got) {
			t.Errorf("CollectionName(%.20q) = %s, not a valid name", tc.conv, got)
		}
	}
	if CollectionName("a b") == CollectionName("a c") {
		t.Error("hashed names collide")
	}
}

func TestWhere(t *testing.T) {
	f, err := retrieval.ParseFilters(map[string]any{
		"document": "a.txt", "page": []any{"2", float64(3)}, "year": []string{"2023", `{"$ne":""}`}, "$or": "x",
	})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(where(f))
	want := `{"$and":[{"document":{"$in":["a.txt"]}},{"page":{"$in":[2,3]}},{"meta.$or":{"$in":["x"]}},{"meta.year":{"$in":["2023","{\"$ne\":\"\"}"]}}]}`
	if string(got) != want {
		t.Errorf("where = %s\nwant    %s", got, want)
	}
	if w := where(retrieval.Filters{}); w != nil {
		t.Errorf("no filters: %v", w)
	}
	f, _ = retrieval.ParseFilters(map[string]any{"section": "A"})
	if got, _ := json.Marshal(where(f)); string(got) != `{"section":{"$in":["A"]}}` {
		t.Errorf("one filter: %s", got)
	}
}
