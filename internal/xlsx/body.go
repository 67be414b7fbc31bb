package xlsx

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
)

// sectionColumn names the column of section labels.
const sectionColumn = "section"

// bodyCounts counts what reading a sheet's body dropped or changed.
type bodyCounts struct {
	rows     int64
	repeated int // rows equal to the header
	sections int // section labels
}

// body calls fn for every row of the table: its section label (nil before
// the first, or when the sheet has none) and its cells in the candidate
// columns (kBlank where empty). The cells are valid until fn returns.
func (s *Sheet) body(fn func(section *cell, cells []cell) error) (bodyCounts, error) {
	lo := s.layout
	var (
		n       bodyCounts
		proj    = make([]cell, len(lo.cols))
		pending []cell // a held label row: a section label, or data after all
		section *cell
		label   cell
		title   = lo.title
		lastIdx = lo.bodyStart - 1
		gap     bool
	)
	flush := func() error {
		if pending == nil {
			return nil
		}
		n.rows++
		err := fn(section, pending)
		pending = nil
		return err
	}
	err := eachSpooled(s.spool, func(idx int32, cells []cell) error {
		if idx < lo.bodyStart || idx >= lo.bodyEnd {
			return nil
		}
		if idx > lastIdx+1 {
			gap = true
		}
		lastIdx = idx
		values := project(lo.cols, cells, proj)
		if values == 0 {
			gap = true
			return nil
		}
		if title != nil { // the title above the header names the first section
			label, section, title = *title, &label, nil
		}
		if values >= 2 && lo.isHeader(proj) {
			if pending != nil { // a label above a repeated header: a section
				label, section, pending = pending[lo.firstColIndex()], &label, nil
				n.sections++
			}
			n.repeated++
			gap = false
			return nil
		}
		if pending != nil {
			if values >= 2 {
				label, section, pending = pending[lo.firstColIndex()], &label, nil
				n.sections++
			} else if err := flush(); err != nil {
				return err
			}
		}
		if values == 1 && gap && lo.isLabel(proj) {
			pending = slices.Clone(proj)
			gap = false
			return nil
		}
		gap = false
		n.rows++
		return fn(section, proj)
	})
	if err != nil {
		return n, err
	}
	return n, flush()
}

// project spreads a row's cells over the candidate columns, and counts its
// values.
func project(cols []int32, cells []cell, out []cell) int {
	clear(out)
	values := 0
	j := 0
	for _, c := range cells {
		for j < len(cols) && cols[j] < c.col {
			j++
		}
		if j == len(cols) {
			break
		}
		if cols[j] == c.col {
			out[j] = c
			values++
		}
	}
	return values
}

// firstColIndex is the index of the table's first column among the
// candidates.
func (lo *layout) firstColIndex() int {
	i, _ := slices.BinarySearch(lo.cols, lo.firstCol)
	return min(i, len(lo.cols)-1)
}

// isLabel says whether a row's only value sits in the table's first column.
func (lo *layout) isLabel(row []cell) bool {
	c := row[lo.firstColIndex()]
	return c.kind != kBlank && c.kind != kErr
}

// isHeader says whether every value of a row is one of the header's texts in
// its column.
func (lo *layout) isHeader(row []cell) bool {
	if len(lo.header) == 0 {
		return false
	}
	for i, c := range row {
		if c.kind == kBlank {
			continue
		}
		if c.kind != kText && c.kind != kNum || !lo.headerSet[i][foldText(cellText(c, lo.dates))] {
			return false
		}
	}
	return true
}

// typeColumns reads the body once to type the candidate columns, then keeps
// those with values or a header of their own.
func (s *Sheet) typeColumns(sc *scan) error {
	lo := s.layout
	stats := make([]colStat, len(lo.cols))
	var sectionStat colStat
	counts, err := s.body(func(section *cell, cells []cell) error {
		for i, c := range cells {
			stats[i].add(c, s.dates)
		}
		if section != nil {
			sectionStat.values++
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.Rows = counts.rows
	var names []string
	if counts.sections > 0 {
		s.keep = append(s.keep, -1)
		names = append(names, sectionColumn)
		s.types = append(s.types, TypeVarchar)
	}
	var errs, bad int
	filled := map[int]bool{} // header merges over a column with values
	for i, st := range stats {
		if st.values > 0 && lo.leafMerge[i] >= 0 {
			filled[lo.leafMerge[i]] = true
		}
	}
	for i := range lo.cols {
		st := &stats[i]
		errs += st.errors
		bad += st.badDates
		if st.values == 0 && st.badDates == 0 && (!lo.ownHeader[i] || filled[lo.leafMerge[i]]) {
			// Padding, or a column under a merged header cell whose
			// values are in another of its columns.
			continue
		}
		s.keep = append(s.keep, i)
		names = append(names, lo.names[i])
		typ := st.typ()
		s.types = append(s.types, typ)
		s.percent = append(s.percent, (typ == TypeDouble || typ == TypeBigint) && st.percent > 0 && st.percent == st.num)
	}
	if counts.sections > 0 {
		s.percent = append([]bool{false}, s.percent...)
	}
	names = uniqueNames(names)
	for i, n := range names {
		s.Columns = append(s.Columns, Column{Name: n, Type: s.types[i], Percent: s.percent[i]})
	}
	s.Notes = append(s.Notes, lo.notes...)
	if counts.repeated > 0 {
		s.Notes = append(s.Notes, fmt.Sprintf("%d %s repeating the header dropped", counts.repeated, plural(counts.repeated, "row", "rows")))
	}
	if counts.sections > 0 {
		s.Notes = append(s.Notes, fmt.Sprintf("%d section %s (a label alone on its row after an empty row) became the column %q of the rows under them", counts.sections, plural(counts.sections, "label", "labels"), s.Columns[0].Name))
	}
	if errs > 0 {
		s.Notes = append(s.Notes, fmt.Sprintf("%d %s held an Excel error (%s): NULL", errs, plural(errs, "cell", "cells"), errorNames(sc.errors)))
	}
	if bad > 0 {
		s.Notes = append(s.Notes, fmt.Sprintf("%d %s held a date that does not exist (29 February 1900, or outside years 1900–9999): NULL", bad, plural(bad, "cell", "cells")))
	}
	return nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// errorNames lists the errors found, most frequent first.
func errorNames(counts map[string]int) string {
	names := make([]string, 0, len(counts))
	for n := range counts {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if counts[names[i]] != counts[names[j]] {
			return counts[names[i]] > counts[names[j]]
		}
		return names[i] < names[j]
	})
	return strings.Join(names, ", ")
}

// emit calls fn with every row of the table as typed values, one per column.
func (s *Sheet) emit(fn func([]value) error) error {
	vals := make([]value, len(s.keep))
	_, err := s.body(func(section *cell, cells []cell) error {
		for i, k := range s.keep {
			switch {
			case k >= 0:
				vals[i] = convert(cells[k], s.types[i], s.dates)
			case section != nil:
				vals[i] = convert(*section, TypeVarchar, s.dates)
			default:
				vals[i] = value{}
			}
		}
		return fn(vals)
	})
	return err
}

func (s *Sheet) writeCSV(w io.Writer) (CSVInfo, error) {
	var info CSVInfo
	bw := bufio.NewWriterSize(w, 256<<10)
	var lb bytes.Buffer // one line
	enc := csv.NewWriter(&lb)
	names := make([]string, len(s.Columns))
	for i, c := range s.Columns {
		names[i] = c.Name
	}
	record := make([]string, len(s.Columns))
	line := func(rec []string) error {
		lb.Reset()
		if err := enc.Write(rec); err != nil {
			return err
		}
		enc.Flush()
		info.MaxLineSize = max(info.MaxLineSize, lb.Len())
		_, err := bw.Write(lb.Bytes())
		return err
	}
	if err := line(names); err != nil {
		return info, err
	}
	err := s.emit(func(vals []value) error {
		for i, v := range vals {
			record[i] = v.csv(s.Columns[i].Type)
		}
		info.Rows++
		return line(record)
	})
	if err != nil {
		return info, err
	}
	return info, bw.Flush()
}
