package web

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"

	"datachat/internal/testenv"
	"datachat/internal/xlsx"
)

// TestResultXLSXOpens writes a result as an .xlsx with the page's own
// writer (assets/js/xlsx.js, run by node) and opens it with excelize and
// with datachat's workbook reader: the file a user downloads must open, with
// numbers as numbers and text (a formula's text too) as text.
func TestResultXLSXOpens(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.Missing(t, "node is not installed: the page's XLSX writer cannot be run")
	}
	abs, err := filepath.Abs("assets/js/xlsx.js")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "how-many-penguins.xlsx")
	script := `
import { toXLSX } from ` + "'file://" + filepath.ToSlash(abs) + "'" + `;
import fs from 'node:fs';
const columns = [{name: 'species', type: 'text'}, {name: 'n', type: 'integer'}, {name: 'avg mass', type: 'float'},
  {name: 'price', type: 'decimal'}, {name: 'big', type: 'integer'}, {name: 'ok', type: 'boolean'}, {name: 'note', type: 'text'}];
const rows = [
  ['Adelie', 152, 3700.5, '1234.50', '9007199254740993', true, '=HYPERLINK("http://x")'],
  ['Gentoo & Chinstrap <b>', 124, null, '0.10', '12', false, 'a\u0001b'],
  ['Élevé 企鹅', 68, 3733.1, null, null, null, null],
];
fs.writeFileSync(process.argv[1], toXLSX(columns, rows, 'How many penguins? [per species]'));
`
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--input-type=module", "-e", script, out)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node: %v\n%s", err, stderr.Bytes())
	}

	f, err := excelize.OpenFile(out)
	if err != nil {
		t.Fatalf("excelize cannot open the workbook: %v", err)
	}
	defer f.Close()
	sheets := f.GetSheetList()
	if len(sheets) != 1 || sheets[0] != "How many penguins   per species" {
		t.Errorf("sheets: got %q, want one named after the question without [ ] ?", sheets)
	}
	rows, err := f.GetRows(sheets[0], excelize.Options{RawCellValue: true})
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"species", "n", "avg mass", "price", "big", "ok", "note"},
		{"Adelie", "152", "3700.5", "1234.50", "9007199254740993", "1", `=HYPERLINK("http://x")`},
		{"Gentoo & Chinstrap <b>", "124", "", "0.10", "12", "0", "a\uFFFDb"},
		{"Élevé 企鹅", "68", "3733.1"},
	}
	if strings.Join(flat(rows), "|") != strings.Join(flat(want), "|") {
		t.Errorf("rows:\n got %q\nwant %q", rows, want)
	}
	for cell, typ := range map[string]excelize.CellType{"B2": excelize.CellTypeNumber, "C2": excelize.CellTypeNumber, "D2": excelize.CellTypeNumber,
		"E2": excelize.CellTypeInlineString, "F2": excelize.CellTypeBool, "G2": excelize.CellTypeInlineString, "A2": excelize.CellTypeInlineString} {
		got, err := f.GetCellType(sheets[0], cell)
		if got == excelize.CellTypeUnset {
			got = excelize.CellTypeNumber // no t attribute: a number, the default
		}
		if err != nil || got != typ {
			t.Errorf("cell %s: type %v (%v), want %v", cell, got, err, typ)
		}
	}
	if formula, _ := f.GetCellFormula(sheets[0], "G2"); formula != "" {
		t.Errorf("G2 holds the formula %q; want the text only", formula)
	}

	wb, err := xlsx.Open(out, "how-many-penguins.xlsx", xlsx.DefaultLimits())
	if err != nil {
		t.Fatalf("datachat's reader cannot open the workbook: %v", err)
	}
	defer wb.Close()
	if len(wb.Sheets) != 1 || wb.Sheets[0].Rows != 3 {
		t.Fatalf("datachat's reader: got %d sheets, want one of 3 rows", len(wb.Sheets))
	}
	var types []string
	for _, c := range wb.Sheets[0].Columns {
		types = append(types, c.Name+":"+c.Type)
	}
	if got, want := strings.Join(types, " "), "species:VARCHAR n:BIGINT avg mass:DOUBLE price:DOUBLE"; !strings.HasPrefix(got, want) {
		t.Errorf("datachat's reader's columns: %s, want them to start %s", got, want)
	}
	if _, err := os.Stat(out); err != nil {
		t.Fatal(err)
	}
}

func flat(rows [][]string) []string {
	var out []string
	for _, r := range rows {
		out = append(out, strings.Join(r, ","))
	}
	return out
}
