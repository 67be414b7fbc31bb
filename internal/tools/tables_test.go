package tools

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"datachat"
)

// TestFindTable: describe_table's name resolves a table however the model
// writes it — its SQL name, unquoted, its last part, with its database —
// and an ambiguous or unknown one is refused naming what to give.
func TestFindTable(t *testing.T) {
	rows := int64(1)
	mk := func(src, name string) datachat.DBSourceInfo {
		return datachat.DBSourceInfo{Name: src, Kind: "postgres", Tables: []datachat.DBSourceTable{{Name: name, Rows: &rows}}}
	}
	tables := datachat.Catalog([]*datachat.Dataset{{Name: "orders"}}, []datachat.DBSourceInfo{
		mk("shop", `public."Order Items"`), mk("dw", "public.orders"), mk("crm", "sales.accounts"), mk("erp", "finance.accounts"),
	})
	cat := &Catalog{TableText: func(t datachat.CatalogTable) string { return "\nTable " + t.Name() + ":\n- id: integer\n" }}
	run := func(tool string, args map[string]string) (*Result, error) {
		b, _ := json.Marshal(args)
		return cat.Run(context.Background(), Call{Conversation: "c1", Tables: tables}, tool, b)
	}
	for _, tc := range []struct{ name, want, err string }{
		{"orders", "orders", ""},
		{"public.orders", "dw.public.orders", ""},
		{"dw.public.orders", "dw.public.orders", ""},
		{`public."Order Items"`, "shop.public.Order Items", ""},
		{"public.order items", "shop.public.Order Items", ""},
		{"accounts", "", "names several tables: crm.sales.accounts, erp.finance.accounts"},
		{"crm.sales.accounts", "crm.sales.accounts", ""},
		{"nothing", "", "list_tables"},
		{`x'; DROP TABLE orders; --`, "", "no table named"},
	} {
		got, err := run(datachat.ToolDescribeTable, map[string]string{"name": tc.name})
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: %v, want an error saying %q", tc.name, err, tc.err)
		case tc.err == "" && (err != nil || got.Tables[0].Key() != tc.want):
			t.Errorf("%q: %v %v, want %s", tc.name, got, err, tc.want)
		}
	}
	res, err := run(datachat.ToolListTables, map[string]string{"source": "nowhere"})
	if err == nil || !strings.Contains(err.Error(), `crm, dw, erp, shop, "datasets"`) {
		t.Errorf("list_tables of a source not attached: %v %v", res, err)
	}
	res, err = run(datachat.ToolListTables, map[string]string{"source": "datasets"})
	if err != nil || !strings.HasPrefix(res.Text, "dataset orders (0 rows)") || strings.Contains(res.Text, "shop") {
		t.Errorf("list_tables of the datasets: %v %v", res, err)
	}
	if res, _ := run(datachat.ToolListTables, map[string]string{"pattern": "*ACCOUNTS"}); !strings.Contains(res.Text, "crm: sales.accounts") || !strings.Contains(res.Text, "erp: finance.accounts") {
		t.Errorf("list_tables *ACCOUNTS: %q", res.Text)
	}
	// describe_table's text: the table as the prompt describes it, and how
	// to query it.
	res, err = run(datachat.ToolDescribeTable, map[string]string{"name": "dw.public.orders"})
	want := "In database dw:\nTable public.orders:\n- id: integer\nQuery it with execute_sql and \"source\": \"dw\", in that database's SQL, naming it public.orders."
	if err != nil || res.Text != want {
		t.Errorf("describe_table's text: %q %v, want %q", res.Text, err, want)
	}
	res, err = run(datachat.ToolDescribeTable, map[string]string{"name": "orders"})
	if want := "Table orders:\n- id: integer\nQuery it with execute_sql without source (DuckDB SQL)."; err != nil || res.Text != want {
		t.Errorf("describe_table's text of a dataset: %q %v, want %q", res.Text, err, want)
	}
}
