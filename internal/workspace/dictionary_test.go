package workspace

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"datachat"
)

// TestSourceDictionary: the dictionary's part on a database source's tables
// is checked against the source's catalog — a table named as describe_table
// finds it, columns in any case, relationships within the source — and,
// stored, reaches the tables as the prompt reads them (Describe): the
// description, the columns', the metrics and synonyms. A source not
// attached, a table or column it lacks, are refused naming them; a
// dictionary file round-trips through DictionaryOf and ParseDictionary.
func TestSourceDictionary(t *testing.T) {
	f := newAuditFixture(t, nil)
	ctx := context.Background()
	d, err := ParseDictionary(ctx, []byte(`
sources:
  warehouse:
    orders:
      description: One row per order.
      columns: {ITEM: What was ordered.}
      metrics:
        orders: {sql: count(*), description: Every order.}
        tea_orders: {sql: count(*), filter: "item = 'tea'"}
      synonyms: {cuppa: "item = 'tea'"}
`))
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.sources.ResolveDictionary(ctx, f.alice, f.conv, d)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.st.UpdateDictionary(ctx, f.alice.ID, f.conv, res); err != nil {
		t.Fatal(err)
	}
	infos, err := f.sources.Describe(ctx, f.alice, f.conv)
	if err != nil {
		t.Fatal(err)
	}
	tb := infos[0].Tables[0]
	if tb.Description != "One row per order." || tb.Columns[1].Description != "What was ordered." || tb.Columns[0].Description != "" ||
		tb.Metrics["tea_orders"].Filter != "item = 'tea'" || tb.Synonyms["cuppa"] != "item = 'tea'" {
		t.Errorf("the table as the prompt reads it: %+v", tb)
	}
	// The metric's statement runs on the source as any query does.
	r, err := f.sources.Query(ctx, f.alice, f.conv, "warehouse", tb.Metrics["tea_orders"].Query(tb.Name))
	if err != nil || len(r.Rows) != 1 || r.Rows[0][0] != int64(1) {
		t.Errorf("the metric on the source: %v %v", r, err)
	}

	// Round trip: the stored dictionary as a file, read back, is the same.
	conv, _ := f.st.Conversation(ctx, f.alice.ID, f.conv)
	layer, _ := f.st.SemanticLayer(ctx, f.conv)
	file := DictionaryOf(conv, nil, layer)
	if got := file.Sources["warehouse"]["public.orders"]; *got.Description != "One row per order." || got.Columns["item"] != "What was ordered." || len(got.Metrics) != 2 {
		t.Errorf("the file's source part: %+v", got)
	}

	for _, tc := range []struct{ text, want string }{
		{"sources: {elsewhere: {orders: {description: x}}}", `unknown database "elsewhere" (the attached ones are warehouse)`},
		{"sources: {warehouse: {creds: {description: x}}}", `no table "creds"`},
		{"sources: {warehouse: {orders: {columns: {price: x}}}}", `has no column "price"`},
		{"sources: {warehouse: {orders: {relationships: [{columns: [id], ref_table: secret.creds, ref_columns: [id]}]}}}", `ref_table "secret.creds" is not a table here`},
	} {
		d, err := ParseDictionary(ctx, []byte(tc.text))
		if err == nil {
			_, err = f.sources.ResolveDictionary(ctx, f.alice, f.conv, d)
		}
		if datachat.ErrorCode(err) != datachat.EINVALID || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want EINVALID saying %q", tc.text, err, tc.want)
		}
	}
	// Another user's conversation.
	if _, err := f.sources.ResolveDictionary(ctx, f.bob, f.conv, d); datachat.ErrorCode(err) != datachat.ENOTFOUND {
		t.Errorf("bob resolving alice's: %v", err)
	}
}

// TestDictionaryRoundTrip: a conversation's whole dictionary — notes,
// descriptions, and the semantic layer of a dataset and of a source's
// table — written as YAML (as GET …/dictionary and datachat dictionary
// export write it) and read back (as an import reads it) is the same;
// with hostile text in every value.
func TestDictionaryRoundTrip(t *testing.T) {
	hostile := "'); DROP TABLE orders; --\n\"quoted\" #not a comment: {x}"
	conv := &datachat.Conversation{Notes: "Revenue excludes refunds.\n" + hostile}
	ds := []*datachat.Dataset{{ID: "d1", Name: "orders", Description: "One row per order.",
		Columns: []datachat.Column{{Name: "amount", Description: "In euros."}, {Name: "region"}}}}
	rels := []datachat.ForeignKey{{Columns: []string{"region"}, RefTable: "regions", RefColumns: []string{"code"}}}
	layer := &datachat.SemanticLayer{
		Datasets: map[string]datachat.TableSemantics{"d1": {
			Metrics:       map[string]datachat.Metric{"revenue": {SQL: "sum(amount)", Filter: "status = 'paid'", Description: hostile}},
			Synonyms:      map[string]string{"EMEA": "region IN ('DE', 'FR')", "'); DROP TABLE orders; -- \"quoted\" #x: {x}": hostile},
			Relationships: rels,
		}},
		Sources: map[string]map[string]datachat.TableSemantics{"warehouse": {"billing.invoices": {
			Description: hostile, Columns: map[string]string{"total_due": "Due."},
			Metrics: map[string]datachat.Metric{"overdue": {SQL: "sum(total_due)", Filter: "status = 'overdue'"}},
		}}},
	}
	d := DictionaryOf(conv, ds, layer)
	b, err := DictionaryYAML(d)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseDictionary(t.Context(), b)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if !reflect.DeepEqual(back, d) {
		t.Errorf("round trip:\n%s\ngot  %#v\nwant %#v", b, back, d)
	}
	// A column named over two lines (a CSV header can be): written quoted,
	// read back the same.
	ds[0].Columns[1].Name, ds[0].Columns[1].Description = "region\ncode", "Two lines."
	d = DictionaryOf(conv, ds, layer)
	if b, err = DictionaryYAML(d); err != nil {
		t.Fatal(err)
	}
	if back, err = ParseDictionary(t.Context(), b); err != nil || !reflect.DeepEqual(back, d) {
		t.Errorf("a column name of two lines: %v\n%s", err, b)
	}
	js, _ := json.Marshal(d)
	back = datachat.Dictionary{}
	if err := json.Unmarshal(js, &back); err != nil || !reflect.DeepEqual(back, d) {
		t.Errorf("JSON round trip: %v\n%s", err, js)
	}
}
