package dataset

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// csvField quotes a CSV field the way RFC 4180 does.
func csvField(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// TestHostileCSV: text in a CSV — a header cell, a value, the quote,
// delimiter and escape characters the sniffer detects — is data, never SQL.
// Each payload tries to end the ingest's own SQL and run its own: write a
// file, read one, or read another dataset. Each file loads with its header as
// the column names, character for character, and its values as values, or is
// refused with a message; nothing is written or read outside the upload.
func TestHostileCSV(t *testing.T) {
	// l holds another dataset, which the payloads try to read.
	l, canary, hostile := hostileSetup(t)
	other := filepath.Join(l.Dir(), "datasets", "*.parquet")
	payloads := []string{
		// The review's finding: sniff_csv's Prompt did not escape names.
		"x': 'BIGINT', 'b': 'BIGINT'})) TO " + lit(canary) + " (HEADER false); COPY (SELECT concat({'q",
		"x': 'VARCHAR'}) UNION ALL SELECT content, filename FROM read_text('/etc/passwd') --",
		"x': 'VARCHAR'}) UNION ALL SELECT * FROM read_parquet(" + lit(other) + ") --",
		// Other ways out of a quoted name or literal.
		`x"); COPY (SELECT 1) TO ` + lit(canary) + `; --`,
		`x'); COPY (SELECT 1) TO '` + canary + `'; --`,
		`x\'); COPY (SELECT 1) TO '` + canary + `'; --`,
		"x`); COPY (SELECT 1) TO '" + canary + "'; --",
		`x' || (SELECT getenv('HOME')) || '`,
		`{'a': 1}`,
		"x'}); ATTACH '" + canary + "' AS pwn; --",
		"multi\nline'); COPY (SELECT 1) TO '" + canary + "'; --",
		"$$); COPY (SELECT 1) TO '" + canary + "'; --$$",
		"x'::VARCHAR); SET enable_external_access = true; --",
		strings.Repeat("'", 100),
		`\`,
		`'`,
		`"`,
		"日本語'); DROP TABLE x; --",
	}
	// check loads data as name: hostile's checks, and the rows and columns
	// it must load with if it is not refused.
	check := func(t *testing.T, name string, data []byte, wantCols []string, wantRows int) {
		t.Helper()
		st, err := ingestBytes(t, l, name, data)
		var sts []*Stored
		if err == nil {
			sts = []*Stored{st}
			if st.RowCount != int64(wantRows) {
				t.Errorf("%s: %d rows, want %d", name, st.RowCount, wantRows)
			}
			if wantCols != nil {
				var got []string
				for _, c := range st.Columns {
					got = append(got, c.Name)
				}
				if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", wantCols) {
					t.Errorf("%s: columns %q, want the header as written %q", name, got, wantCols)
				}
			}
		}
		hostile(t, name, sts, err)
	}
	t.Run("payloads", func(t *testing.T) {
		for i, p := range payloads {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel() // as many at once as the loader converts
				// The payload as a header cell and as a value.
				data := csvField(p) + ",b\n" + csvField(p) + ",2\nplain,4\n"
				check(t, fmt.Sprintf("h%d.csv", i), []byte(data), []string{p, "b"}, 2)
			})
		}
	})
	// The dialect the sniffer detects: a quote character, a delimiter and an
	// escape that are themselves SQL's quote and separators.
	dialects := map[string]struct {
		data string
		rows int
	}{
		"single-quote quoting": {"a;b\n'x'';y';1\n'z';2\n", 2},
		"semicolon and quote":  {"a';b\n1;2\n3;4\n", 2},
		"backslash escapes":    {"a,b\n\"x\\\"); COPY (SELECT 1) TO '" + canary + "'; --\",1\n\"y\",2\n", 2},
		"pipe and dates":       {"d|x': 'DATE'}) TO '" + canary + "'; --\n01/02/2024|1\n13/02/2024|2\n", 2},
		"tab, no header":       {"1\t2\n3\t4\n5\t6\n", 3},
	}
	t.Run("dialects", func(t *testing.T) {
		for name, c := range dialects {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				check(t, strings.ReplaceAll(name, " ", "_")+".csv", []byte(c.data), nil, c.rows)
			})
		}
	})
	mustBeClean(t, l)
}
