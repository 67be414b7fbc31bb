package dataset

import (
	"fmt"
	"path"
	"strings"
	"testing"
)

// TestNumbersWithDecimalCommas: a CSV written with decimal commas (European
// style: ";" between fields, "1.234,56" or "1 234,56") loads those columns
// as numbers, column by column, and says so in the dataset's notes.
func TestNumbersWithDecimalCommas(t *testing.T) {
	l := mustLoader(t, Options{})
	for _, tc := range []struct {
		name, csv string
		columns   string   // name:type, in order
		sums      string   // SELECT list whose one row is checked
		want      string   // fmt.Sprint of that row
		notes     []string // each in some note
		noNote    bool
	}{
		{
			name: "dots between thousands",
			csv: "Datum;Betrag;Menge;Kommentar;Anteil\n" +
				"31.12.2024;1.234,56;3;erste;12,5\n" +
				"01.01.2025;12,5;4;zweite;0,5\n" +
				"02.01.2025;1.000.000,00;5;dritte;100\n" +
				"03.01.2025;-7,25;6;;\n",
			columns: "Datum:date,Betrag:float,Menge:integer,Kommentar:text,Anteil:float",
			sums:    `round(sum("Betrag"), 2), sum("Anteil"), count("Anteil"), min("Datum")::VARCHAR`,
			want:    "[1.00123981e+06 113 3 2024-12-31]",
			notes:   []string{`"Betrag"`, `"Anteil"`, "1.234,56"},
		},
		{
			name: "spaces between thousands",
			csv: "date;montant;quantité\n" +
				"2024-01-02;1 234,56;1\n" +
				"2024-01-03;12 345 678,9;2\n" +
				"2024-01-04;3,5;3\n" +
				"2024-01-05;1\u00a0000,25;4\n" +
				"2024-01-06;2\u202f000;5\n",
			columns: "date:date,montant:float,quantité:integer",
			sums:    `round(sum("montant"), 2)`,
			want:    "[1.234991721e+07]",
			notes:   []string{`"montant"`, "1 234,56"},
		},
		{
			// DuckDB alone reads 1.234 as one point two three four.
			name: "whole numbers with dots between thousands beside decimal commas",
			csv: "Artikel;Stückzahl;Preis\n" +
				"A;1.234;2,50\n" +
				"B;12.500;3,75\n" +
				"C;500;1,00\n",
			columns: "Artikel:text,Stückzahl:integer,Preis:float",
			sums:    `sum("Stückzahl"), sum("Preis")`,
			want:    "[14234 7.25]",
			notes:   []string{`"Stückzahl"`, `"Preis"`},
		},
		{
			name:    "a tab-separated file",
			csv:     "Land\tWert\nDE\t1.234,5\nAT\t0,75\n",
			columns: "Land:text,Wert:float",
			sums:    `sum("Wert")`,
			want:    "[1235.25]",
			notes:   []string{`"Wert"`},
		},
		{
			// The same kind of break the other way: thousands commas.
			name:    "commas between thousands, decimal points",
			csv:     "item,amount,units\nA,\"1,234.56\",\"1,000\"\nB,\"12,345,678.90\",\"25,000\"\nC,3.5,7\n",
			columns: "item:text,amount:float,units:integer",
			sums:    `round(sum(amount), 2), sum(units)`,
			want:    "[1.234691696e+07 26007]",
			notes:   []string{`"amount"`, `"units"`, "1,234.56"},
		},
		{
			// Either reading would do (1,234 is 1.234 or 1234): nothing in
			// the file tells, so the text is kept, and the note says why.
			name:    "ambiguous",
			csv:     "code;wert\nA;1,234\nB;2,500\n",
			columns: "code:text,wert:text",
			sums:    `count(*)`,
			want:    "[2]",
			notes:   []string{`"wert"`, "Kept as text", `CAST(replace("wert", ',', '.') AS DOUBLE)`},
		},
		{
			// Both ways in one file: latitudes with a decimal point, prices
			// with a decimal comma. 1.234 cannot be told; said so.
			name:    "both ways",
			csv:     "Ort;Breite;Menge;Preis\nA;48.137154;1.234;2,50\nB;52.520008;12.500;3,75\n",
			columns: "Ort:text,Breite:float,Menge:float,Preis:float",
			sums:    `sum("Preis")`,
			want:    "[6.25]",
			notes:   []string{`"Preis"`, `Column "Menge" was read as fractions`},
		},
		{
			// Names are quoted wherever they go.
			name:    "a hostile header",
			csv:     "k;x') TO 'pwn.csv' --\na;1,5\nb;2,25\n",
			columns: "k:text,x') TO 'pwn.csv' --:float",
			sums:    `sum("x') TO 'pwn.csv' --")`,
			want:    "[3.75]",
			notes:   []string{"were read as numbers"},
		},
		{
			name:    "text that is not all numbers stays text",
			csv:     "k;v\na;1,5\nb;about 2\nc;3,25\n",
			columns: "k:text,v:text",
			sums:    `count(*)`,
			want:    "[3]",
			noNote:  true,
		},
		{
			name:    "plain decimals are left to DuckDB",
			csv:     "a,b\n1.5,2\n2.25,3\n",
			columns: "a:float,b:integer",
			sums:    `sum(a)`,
			want:    "[3.75]",
			noNote:  true,
		},
		{
			// Version numbers and dotted codes are not numbers.
			name:    "dotted codes",
			csv:     "pkg;version\na;1.2.3\nb;10.20.30\n",
			columns: "pkg:text,version:text",
			sums:    `count(*)`,
			want:    "[2]",
			noNote:  true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := ingestBytes(t, l, "data.csv", []byte(tc.csv))
			if err != nil {
				t.Fatal(err)
			}
			if got := columnNames(st); got != tc.columns {
				t.Errorf("columns %s, want %s", got, tc.columns)
			}
			rows := query(t, l, st, "SELECT "+tc.sums+" FROM {t}")
			if got := fmt.Sprint(rows[0]); got != tc.want {
				t.Errorf("%s: got %s, want %s", tc.sums, got, tc.want)
			}
			notes := strings.Join(st.Notes, "\n")
			for _, n := range tc.notes {
				if !strings.Contains(notes, n) {
					t.Errorf("notes %q lack %q", st.Notes, n)
				}
			}
			if tc.noNote && len(st.Notes) > 0 {
				t.Errorf("notes %q, want none", st.Notes)
			}
		})
	}
	mustBeClean(t, l)
}

// TestSharedCSVNumbersUnchanged: the real CSVs of ../shared/data, none of
// them written with decimal commas, load as before: no column converted.
func TestSharedCSVNumbersUnchanged(t *testing.T) {
	l := mustLoader(t, Options{})
	for _, rel := range []string{"csv/tips.csv", "csv/titanic.csv", "csv/penguins.csv", "csv/flights.csv", "csv/diamonds.csv", "csv/avengers.csv", "csv/cabinet-turnover.csv", "csv/test_mskanji.csv"} {
		st := mustIngestShared(t, l, rel)
		for _, n := range st.Notes {
			if strings.Contains(n, "were read as numbers") || strings.Contains(n, "Kept as text") {
				t.Errorf("%s: note %q", path.Base(rel), n)
			}
		}
	}
}
