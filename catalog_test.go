package datachat

import (
	"fmt"
	"strings"
	"testing"
)

// TestSplitQualified: a qualified name as a source's SQL writes it splits
// into its unquoted parts, quotes doubled inside read as one; text that is
// not well formed (an unterminated quote, stray dots) splits without
// failing.
func TestSplitQualified(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"public.orders", []string{"public", "orders"}},
		{`public."Order ""Items"""`, []string{"public", `Order "Items"`}},
		{"`shop`.`a``b`", []string{"shop", "a`b"}},
		{`"a.b".c`, []string{"a.b", "c"}},
		{`"unterminated.x`, []string{"unterminated.x"}},
		{"..", []string{"", "", ""}},
		{"", []string{""}},
		{`"x""); DROP TABLE t; --"`, []string{`x"); DROP TABLE t; --`}},
	} {
		if got := SplitQualified(tc.in); fmt.Sprint(got) != fmt.Sprint(tc.want) || len(got) != len(tc.want) {
			t.Errorf("SplitQualified(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestMatchTables: patterns match a table's whole unquoted name or its
// last parts, case aside; a part of the name matches without wildcards; a
// bad pattern matches nothing rather than failing.
func TestMatchTables(t *testing.T) {
	rows := int64(1)
	cat := Catalog([]*Dataset{{Name: "invoices_2024"}}, []DBSourceInfo{{Name: "dw", Kind: "postgres", Tables: []DBSourceTable{
		{Name: "billing.invoices", Rows: &rows}, {Name: `public."Invoice Lines"`, Rows: &rows}, {Name: "crm.accounts", Rows: &rows},
	}}})
	keys := func(ts []CatalogTable) string {
		var out []string
		for _, t := range ts {
			out = append(out, t.Key())
		}
		return strings.Join(out, " ")
	}
	for _, tc := range []struct{ source, pattern, want string }{
		{"", "*invoice*", "invoices_2024 dw.billing.invoices dw.public.Invoice Lines"},
		{"dw", "INVOICE", "dw.billing.invoices dw.public.Invoice Lines"},
		{"datasets", "", "invoices_2024"},
		{"", "billing.*", "dw.billing.invoices"},
		{"", "[", ""},
		{"", "accounts", "dw.crm.accounts"},
	} {
		got, err := MatchTables(cat, tc.source, tc.pattern)
		if err != nil || keys(got) != tc.want {
			t.Errorf("MatchTables(%q, %q) = %q %v, want %q", tc.source, tc.pattern, keys(got), err, tc.want)
		}
	}
	if _, err := MatchTables(cat, "elsewhere", ""); err == nil || !strings.Contains(err.Error(), `dw, "datasets"`) {
		t.Errorf("an unknown source: %v", err)
	}
}
