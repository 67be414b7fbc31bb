package xlsx

import (
	"strconv"
	"strings"
)

// parseRef parses a cell reference such as "B12" (column 1, row 11; $ signs
// allowed).
func parseRef(ref string) (col, row int, ok bool) {
	ref = strings.ReplaceAll(ref, "$", "")
	i := 0
	for i < len(ref) && i < 4 {
		ch := ref[i] | 0x20
		if ch < 'a' || ch > 'z' {
			break
		}
		col = col*26 + int(ch-'a'+1)
		i++
	}
	if i == 0 || col > excelCols {
		return 0, 0, false
	}
	n, err := strconv.Atoi(ref[i:])
	if err != nil || n < 1 || n > excelRows {
		return 0, 0, false
	}
	return col - 1, n - 1, true
}

// parseRange parses "A1:B2" (or a single cell).
func parseRange(ref string) (mergeRange, bool) {
	a, b, found := strings.Cut(ref, ":")
	if !found {
		b = a
	}
	c0, r0, ok0 := parseRef(a)
	c1, r1, ok1 := parseRef(b)
	if !ok0 || !ok1 {
		return mergeRange{}, false
	}
	return mergeRange{r0: int32(min(r0, r1)), c0: int32(min(c0, c1)), r1: int32(max(r0, r1)), c1: int32(max(c0, c1))}, true
}

// cellName spells a cell's reference: row 0, column 0 is A1.
func cellName(row, col int) string {
	return colName(col) + strconv.Itoa(row+1)
}

func colName(col int) string {
	var b []byte
	for col++; col > 0; col = (col - 1) / 26 {
		b = append([]byte{byte('A' + (col-1)%26)}, b...)
	}
	return string(b)
}
