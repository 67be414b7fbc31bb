package eval

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"datachat/internal/testfiles"
)

func writeSuite(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "suite.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const question = "questions:\n  - {id: q1, question: How many, datasets: [a.csv], sql: SELECT 1}\n"

// TestLoadHostile: suite files built to exhaust the eval command are
// refused at once, saying which limit they passed.
func TestLoadHostile(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"merge keys in the dictionary", question + "dictionary:\n" + strings.ReplaceAll(testfiles.YAMLMerges(20, 9), "\n", "\n  "), "through its aliases (*name) and merge keys"},
		{"laughs in the expected rows", question + "x: " + strings.ReplaceAll("\n"+testfiles.YAMLLaughs(9, 9), "\n", "\n  "), "through its aliases"},
		{"laughs into expected rows", testfiles.YAMLLaughs(9, 9) + "questions:\n  - {id: q1, question: x, datasets: [a.csv], expected: {rows: [*a8, *a8]}}\n", "through its aliases"},
		{"deep flow", question + "name: " + strings.Repeat("[", 40_000) + strings.Repeat("]", 40_000) + "\n", "nests more than 64 levels deep"},
		{"deep block", question + "name:\n  " + strings.Repeat("- ", 40_000) + "x\n", "nests more than 64 levels deep"},
		{"recursive alias", "questions: &q\n  - {id: q1, question: x, datasets: *q}\n", "inside its own anchor"},
		{"two documents", question + "---\n" + question, "more than one YAML document"},
		{"not UTF-8", "questions:\n  - {id: q1, question: caf\xe9, datasets: [a.csv]}\n", "the value of questions[0].question (line 2)"},
		{"unknown field", question + "colour: red\n", `unknown field "colour"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, err := Load(t.Context(), writeSuite(t, tc.text))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "suite.yaml") {
				t.Fatalf("got %v, want an error naming the file with %q", err, tc.want)
			}
			t.Logf("%v in %v", err, time.Since(start))
		})
	}
	// Larger than the limit: refused before it is read whole.
	big := filepath.Join(t.TempDir(), "big.yaml")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(MaxSuiteBytes + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := Load(t.Context(), big); err == nil || !strings.Contains(err.Error(), "more than the 4 MiB accepted") {
		t.Errorf("a file over the limit: %v", err)
	}
}

// TestLoadDates: a date in expected rows stays the text written, as a
// query result gives it.
func TestLoadDates(t *testing.T) {
	s, err := Load(t.Context(), writeSuite(t, "questions:\n  - id: q1\n    question: When?\n    datasets: [a.csv]\n    expected: {rows: [[2024-01-31, 3, 2.5, x]]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	row := s.Questions[0].Expected.Rows[0]
	if row[0] != "2024-01-31" || row[1] != 3 || row[2] != 2.5 || row[3] != "x" {
		t.Errorf("got %#v", row)
	}
}

// TestLoadUnanswerable: an unanswerable question gives what its answer must
// say is missing, and neither gold SQL nor numbers; missing and guesses
// belong to unanswerable questions only; a question's source is one of the
// suite's, whose URL comes from the environment.
func TestLoadUnanswerable(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"no missing", "questions:\n  - {id: q1, question: x, datasets: [a.csv], unanswerable: true}\n", "give missing"},
		{"with sql", "questions:\n  - {id: q1, question: x, datasets: [a.csv], unanswerable: true, missing: [a], sql: SELECT 1}\n", "not sql"},
		{"missing on an answerable one", "questions:\n  - {id: q1, question: x, datasets: [a.csv], missing: [a]}\n", "for unanswerable questions"},
		{"an unknown source", "questions:\n  - {id: q1, question: x, datasets: [a.csv], source: dw, sql: SELECT 1}\n", `source "dw" is not one of the suite's sources`},
		{"a source without url_env", "sources: [{name: dw}]\nquestions:\n  - {id: q1, question: x}\n", "url_env"},
	} {
		if _, err := Load(t.Context(), writeSuite(t, tc.text)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
	if _, err := Load(t.Context(), "../../bench/eval/example/unanswerable.yaml"); err != nil {
		t.Errorf("the example suite of unanswerable questions: %v", err)
	}
	if _, err := Load(t.Context(), "../../bench/schema/suite.yaml"); err != nil {
		t.Errorf("the 500 tables' suite: %v", err)
	}
}
