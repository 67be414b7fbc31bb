package chat

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"datachat"
	"datachat/internal/llmtest"
)

// wideSources is one attached database of many tables: n filler tables
// named area_table_i, plus billing.invoices (referencing crm.customers),
// billing.invoices_archive (its copy), crm.customers, and a table whose name
// is hostile.
type wideSources struct {
	fakeSources
	n int
}

func (w *wideSources) Describe(context.Context, *datachat.User, string) ([]datachat.DBSourceInfo, error) {
	rows := int64(5000)
	invoices := []datachat.Column{
		{Name: "invoice_id", Type: "integer"}, {Name: "customer_id", Type: "integer"}, {Name: "total_due", Type: "decimal"},
		{Name: "status", Type: "text", Samples: []string{"paid", "overdue"}},
	}
	tables := []datachat.DBSourceTable{
		{Name: `public."x""); DROP TABLE t; --"`, Rows: &rows, Columns: []datachat.Column{{Name: "n", Type: "integer"}}},
		{Name: "billing.invoices_archive", Rows: &rows, Columns: invoices},
	}
	areas := []string{"inventory", "shipping", "marketing", "payroll", "support", "warehouse", "logistics", "procurement"}
	for i := range w.n {
		rows := int64(1000 + i)
		area := areas[i%len(areas)]
		tables = append(tables, datachat.DBSourceTable{Name: fmt.Sprintf("%s.%s_table_%d", area, area, i), Rows: &rows, Columns: []datachat.Column{
			{Name: "id", Type: "integer"}, {Name: area + "_code", Type: "text", Samples: []string{"A1", "B2"}},
			{Name: "created_at", Type: "timestamp"}, {Name: "amount_" + fmt.Sprint(i), Type: "decimal"},
		}})
	}
	tables = append(tables,
		datachat.DBSourceTable{Name: "billing.invoices", Rows: &rows, Columns: invoices, ForeignKeys: []datachat.ForeignKey{{Columns: []string{"customer_id"}, RefTable: "crm.customers", RefColumns: []string{"id"}}}},
		datachat.DBSourceTable{Name: "crm.customers", Rows: &rows, Columns: []datachat.Column{
			{Name: "id", Type: "integer"}, {Name: "full_name", Type: "text"}, {Name: "segment", Type: "text", Samples: []string{"smb", "enterprise"}},
		}},
	)
	return []datachat.DBSourceInfo{{Name: "warehouse", Kind: "postgres", Dialect: "PostgreSQL 15.14", Tables: tables}}, nil
}

// schemaSection is the part of a prompt from "## Databases" to "## How to
// query": the tables' descriptions and the other tables' names.
func schemaSection(system string) string {
	i, j := strings.Index(system, "## Databases"), strings.Index(system, "## How to query")
	if i < 0 || j < i {
		return ""
	}
	return system[i:j]
}

// TestSchemaWithinBudget: a database of 400 tables does not fit the
// schema budget: the prompt describes the tables the question is about
// (billing.invoices for "overdue invoices") with the table its foreign key
// references (crm.customers) and its join, its copy (invoices_archive) in
// one line naming it, names the others by schema (a hostile name quoted as
// its SQL writes it), stays within the budget, and declares
// list_tables and describe_table, which reach the rest; the next turn keeps
// the tables the earlier queries used even when the question does not name
// them. Tables that fit are described whole, with no tool to reach them.
func TestSchemaWithinBudget(t *testing.T) {
	const budget = 2000 // tokens
	f := newTurnFixture(t, llmtest.Script{Turns: []llmtest.Turn{
		{Match: &llmtest.Match{LastRole: "user", Contains: "overdue"}, ToolCalls: []llmtest.ToolCall{
			llmtest.Call("describe_table", `{"name": "inventory_table_8"}`),
			llmtest.Call("list_tables", `{"pattern": "*payroll_table_1?"}`),
			llmtest.Call("execute_sql", `{"query": "SELECT count(*) FROM billing.invoices WHERE status = 'overdue'", "source": "warehouse"}`)}},
		{Match: &llmtest.Match{LastRole: "tool"}, Text: []string{"Done."}},
		{Match: &llmtest.Match{LastRole: "user", Contains: "and then"}, Text: []string{"Sure."}},
	}})
	src := &wideSources{n: 400}
	src.result = countResult(7)
	f.r.Sources, f.r.Data, f.r.SchemaBudget = src, &saveData{}, budget
	evs, out, err := f.send(t, "How many overdue invoices are there?")
	if err != nil {
		t.Fatal(err)
	}
	reqs := f.fake.ChatRequests()
	system := reqs[0].Messages[0].Text
	section := schemaSection(system)
	t.Logf("schema section: %d characters (budget %d tokens = %d characters); the whole prompt %d", len(section), budget, budget*4, len(system))
	if len(section) > budget*4 {
		t.Errorf("the schema section is %d characters, past the budget of %d", len(section), budget*4)
	}
	for _, w := range []string{
		"Table billing.invoices (about 5000 rows):", "Joins: customer_id → crm.customers.id",
		"Table crm.customers (about 5000 rows):", "## Other tables", "describe_table",
		`- Database warehouse, schema public: "x""); DROP TABLE t; --"`,
		"Table billing.invoices_archive (about 5000 rows): The same columns as billing.invoices.\n",
	} {
		if !strings.Contains(system, w) {
			t.Errorf("the prompt lacks %q:\n%s", w, section)
		}
	}
	if strings.Contains(system, "Table inventory.inventory_table_8 ") {
		t.Errorf("a table the question is not about is described")
	}
	if !reqs[0].HasTool("list_tables") || !reqs[0].HasTool("describe_table") {
		t.Errorf("tools %v, want list_tables and describe_table", reqs[0].Tools)
	}
	if len(out.PromptTables) == 0 || !containsStr(out.PromptTables, "warehouse.billing.invoices") || len(out.PromptTables) >= 404 {
		t.Errorf("prompt tables %v", out.PromptTables)
	}
	_, results := toolRounds(t, evs)
	if len(results) != 3 {
		t.Fatalf("%d results, want 3", len(results))
	}
	if r := results[0]; !r.OK || !strings.Contains(r.Content, "In database warehouse:\nTable inventory.inventory_table_8 (about 1008 rows):") ||
		!strings.Contains(r.Content, "- amount_8: decimal") || !strings.Contains(r.Content, `"source": "warehouse"`) {
		t.Errorf("describe_table: %+v", r)
	}
	if r := results[1]; !r.OK || !strings.Contains(r.Content, "warehouse: payroll.payroll_table_11 (about 1011 rows)") || strings.Contains(r.Content, "inventory") {
		t.Errorf("list_tables: %+v", r)
	}

	// The next turn's question names no table: the one the earlier query
	// used stays described.
	if _, _, err := f.send(t, "and then?"); err != nil {
		t.Fatal(err)
	}
	reqs = f.fake.ChatRequests()
	if next := reqs[len(reqs)-1].Messages[0].Text; !strings.Contains(next, "Table billing.invoices (about 5000 rows):") {
		t.Errorf("the table the earlier query used is not described in the next turn:\n%s", schemaSection(next))
	}

	// Few tables: all described, no list_tables.
	g := newTurnFixture(t, llmtest.Script{Turns: []llmtest.Turn{{Text: []string{"ok"}}}})
	g.r.Sources, g.r.Data, g.r.SchemaBudget = &wideSources{n: 3}, &saveData{}, budget
	if _, out, err := g.send(t, "hello"); err != nil {
		t.Fatal(err)
	} else if len(out.PromptTables) != 7 {
		t.Errorf("prompt tables %v, want all 7", out.PromptTables)
	}
	r := g.fake.ChatRequests()[0]
	if strings.Contains(r.Messages[0].Text, "Other tables") || r.HasTool("list_tables") {
		t.Errorf("tables that fit: the prompt names others or declares list_tables:\n%s", r.Messages[0].Text)
	}
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
