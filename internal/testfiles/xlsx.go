package testfiles

import (
	"bytes"
	"fmt"

	"github.com/xuri/excelize/v2"
)

// Sheet is one worksheet of a Workbook: its name and rows (the first the header).
type Sheet struct {
	Name string
	Rows [][]any
}

// Workbook builds an Excel workbook (.xlsx) with these sheets, in order.
func Workbook(sheets ...Sheet) []byte {
	f := excelize.NewFile()
	defer f.Close()
	for i, sh := range sheets {
		if i == 0 {
			must(f.SetSheetName("Sheet1", sh.Name))
		} else if _, err := f.NewSheet(sh.Name); err != nil {
			panic(err)
		}
		for r, row := range sh.Rows {
			cell, err := excelize.CoordinatesToCellName(1, r+1)
			must(err)
			must(f.SetSheetRow(sh.Name, cell, &row))
		}
	}
	var buf bytes.Buffer
	must(f.Write(&buf))
	return buf.Bytes()
}

// ZooWorkbook is a workbook of three sheets — animals, keepers and feedings —
// each a small table: an upload of it makes three tables.
func ZooWorkbook() []byte {
	animals := Sheet{Name: "animals", Rows: [][]any{{"name", "species", "age"}}}
	keepers := Sheet{Name: "keepers", Rows: [][]any{{"keeper", "since"}}}
	feedings := Sheet{Name: "feedings", Rows: [][]any{{"animal", "kg"}}}
	for i, sp := range []string{"lion", "zebra", "penguin", "otter"} {
		animals.Rows = append(animals.Rows, []any{fmt.Sprintf("%s %d", sp, i+1), sp, 2 + i})
		feedings.Rows = append(feedings.Rows, []any{fmt.Sprintf("%s %d", sp, i+1), 1.5 * float64(i+1)})
	}
	keepers.Rows = append(keepers.Rows, []any{"Ana", 2019}, []any{"Bo", 2021})
	return Workbook(animals, keepers, feedings)
}

func must(err error) {
	if err != nil {
		panic(fmt.Sprintf("testfiles: %v", err))
	}
}
