package datachat

import (
	"strings"
	"testing"
)

// TestResolveSemantics: a dictionary's semantic layer on a dataset is
// checked as its descriptions are — and more: a metric's name is a name, its
// SQL one expression and its filter one condition (no ;), a synonym's term
// one line, a relationship's columns the table's and its ref_table another
// dataset with those columns, as many of each — every problem named at once.
func TestResolveSemantics(t *testing.T) {
	datasets := []*Dataset{
		{Name: "orders", Columns: []Column{{Name: "customer"}, {Name: "amount"}}},
		{Name: "customers", Columns: []Column{{Name: "code"}}},
	}
	ok := []ForeignKey{{Columns: []string{"CUSTOMER"}, RefTable: "Customers", RefColumns: []string{"CODE"}}}
	d, err := Dictionary{Datasets: map[string]DatasetDictionary{"orders": {
		Metrics:       map[string]Metric{"revenue": {SQL: "sum(amount)", Filter: "amount > 0"}, "Net Sales 2": {SQL: "sum(amount)"}},
		Synonyms:      map[string]string{"turnover": "revenue"},
		Relationships: &ok,
	}}}.Resolve(datasets)
	if err != nil {
		t.Fatal(err)
	}
	if r := (*d.Datasets["orders"].Relationships)[0]; r.Columns[0] != "customer" || r.RefTable != "customers" || r.RefColumns[0] != "code" {
		t.Errorf("resolved relationship %+v, want the names as the datasets write them", r)
	}
	bad := []ForeignKey{
		{Columns: []string{"customer"}, RefTable: "clients", RefColumns: []string{"code"}},
		{Columns: []string{"customer", "amount"}, RefTable: "customers", RefColumns: []string{"code"}},
		{Columns: []string{"buyer"}, RefTable: "customers", RefColumns: []string{"id"}},
	}
	_, err = Dictionary{Datasets: map[string]DatasetDictionary{"orders": {
		Metrics: map[string]Metric{
			"x; DROP TABLE orders":  {SQL: "1"},
			"two":                   {SQL: "sum(amount); DELETE FROM orders"},
			"long":                  {SQL: strings.Repeat("1+", MaxMetricSQL)},
			strings.Repeat("m", 65): {SQL: "1"},
		},
		Synonyms:      map[string]string{"two\nlines": "x", "": "y", "fine": strings.Repeat("é", MaxDescriptionChars+1)},
		Relationships: &bad,
	}}}.Resolve(datasets)
	if ErrorCode(err) != EINVALID {
		t.Fatalf("got %v, want EINVALID", err)
	}
	for _, want := range []string{`metric "x; DROP TABLE orders"`, "metric two of orders: give one expression", "metric long of orders: its sql or filter is longer",
		`metric "mmmm`, `synonym "two\nlines"`, `synonym ""`, `the meaning of synonym "fine"`, `ref_table "clients" is not a table here`,
		"relationship 2 of orders: give columns and ref_columns, as many of each", `orders has no column "buyer"`, `customers has no column "id"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q:\n%v", want, err)
		}
	}
}

// TestMetricQuery: a metric's statement is its expression over the table,
// with its filter when it has one.
func TestMetricQuery(t *testing.T) {
	if q := (Metric{SQL: " sum(amount) "}).Query(`"orders"`); q != `SELECT sum(amount) AS metric FROM "orders"` {
		t.Errorf("got %q", q)
	}
	if q := (Metric{SQL: "count(*)", Filter: "status = 'paid'"}).Query("billing.invoices"); q != "SELECT count(*) AS metric FROM billing.invoices WHERE status = 'paid'" {
		t.Errorf("got %q", q)
	}
}
