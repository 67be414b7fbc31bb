// Package eval measures how well the chat answers questions about data: it
// runs a suite of questions, each through the real chat turn with the
// configured model in a fresh conversation, and scores every answer against
// the expected result and numbers. `datachat eval` is its command line.
//
// Each question is scored on
//
//   - execution match: the result of the turn's last successful execute_sql
//     equals the expected rows — as a multiset, or as a list when the
//     question is ordered — with numbers equal to 1e-6 relative and column
//     names ignored. The expected rows are the question's expected, else the
//     result of its gold sql, run in the same conversation before the turn.
//   - answer match: every one of the question's numbers is found in the
//     answer's text by internal/numcheck, the checker of the answers' numbers:
//     one of the numbers it checks reads (numcheck.Values) as that value, to
//     1e-6 relative, or matches it as the checker matches a result cell
//     (formatting, and rounding to the digits shown: "$15.8K" for 15823.75).
//
// A match that does not apply (no expected rows, no numbers) is null and left
// out of the accuracy. Tool calls, failed SQL, tokens and seconds are counted
// too. A question whose turn fails scores what it got before it failed, with
// the error.
package eval

import (
	"datachat/internal/workspace"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/goccy/go-yaml"

	"datachat"
)

// Suite is a suite of questions, read from a JSON or YAML file.
type Suite struct {
	Name      string     `json:"name" yaml:"name"`
	Questions []Question `json:"questions" yaml:"questions"`
	// Dictionary is applied to each question's conversation, to the tables
	// it has (the levers --no-dictionary turns off).
	Dictionary *datachat.Dictionary `json:"dictionary,omitempty" yaml:"dictionary,omitempty"`
	// Examples are verified before the questions run, each in a
	// conversation of its datasets, as a user marking them correct would
	// (the lever --no-examples turns off).
	Examples []Example `json:"examples,omitempty" yaml:"examples,omitempty"`

	dir string // where relative paths start: the suite file's directory
}

// Question is one question of a suite and what a right answer is.
type Question struct {
	ID       string `json:"id" yaml:"id"`
	Question string `json:"question" yaml:"question"`
	// Datasets and Documents are files (relative to the suite file) or URLs.
	Datasets  []string `json:"datasets" yaml:"datasets"`
	Documents []string `json:"documents,omitempty" yaml:"documents,omitempty"`
	// SQL is the gold query: its result is the expected one, unless
	// Expected is given.
	SQL      string    `json:"sql,omitempty" yaml:"sql,omitempty"`
	Expected *Expected `json:"expected,omitempty" yaml:"expected,omitempty"`
	// Ordered compares the rows as a list rather than a multiset.
	Ordered bool `json:"ordered,omitempty" yaml:"ordered,omitempty"`
	// Numbers are values the answer's text must contain.
	Numbers []float64 `json:"numbers,omitempty" yaml:"numbers,omitempty"`
}

// Expected is an expected result. Columns are for people reading the suite:
// names are not compared.
type Expected struct {
	Columns []string `json:"columns,omitempty" yaml:"columns,omitempty"`
	Rows    [][]any  `json:"rows" yaml:"rows"`
}

// Example is a verified example a suite gives.
type Example struct {
	Question string   `json:"question" yaml:"question"`
	SQL      string   `json:"sql" yaml:"sql"`
	Datasets []string `json:"datasets" yaml:"datasets"`
}

// Load reads a suite file, JSON or YAML, and checks it: every question has
// an id (unique), a question and datasets; an example has a question, its
// SQL and datasets.
func Load(path string) (*Suite, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s Suite
	if err := yaml.UnmarshalWithOptions(b, &s, yaml.DisallowUnknownField()); err != nil {
		return nil, fmt.Errorf("suite %s:\n%s", path, yaml.FormatError(err, false, true))
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	s.dir = filepath.Dir(abs)
	if s.Name == "" {
		s.Name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	}
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("suite %s: %w", path, err)
	}
	return &s, nil
}

func (s *Suite) check() error {
	if len(s.Questions) == 0 {
		return fmt.Errorf("no questions")
	}
	seen := map[string]bool{}
	for i, q := range s.Questions {
		switch {
		case strings.TrimSpace(q.ID) == "":
			return fmt.Errorf("question %d has no id", i+1)
		case seen[q.ID]:
			return fmt.Errorf("two questions have the id %q", q.ID)
		case strings.TrimSpace(q.Question) == "":
			return fmt.Errorf("question %s has no question", q.ID)
		case len(q.Datasets) == 0 && len(q.Documents) == 0:
			return fmt.Errorf("question %s has no datasets (nor documents)", q.ID)
		case q.Expected != nil && q.Expected.Rows == nil:
			return fmt.Errorf("question %s: expected has no rows (write rows: [] for an empty result)", q.ID)
		}
		seen[q.ID] = true
	}
	for i, e := range s.Examples {
		if strings.TrimSpace(e.Question) == "" || strings.TrimSpace(e.SQL) == "" || len(e.Datasets) == 0 {
			return fmt.Errorf("example %d: give its question, sql and datasets", i+1)
		}
	}
	return nil
}

// path resolves a dataset or document of the suite: a URL as is, a file
// relative to the suite file.
func (s *Suite) path(p string) string {
	if workspace.IsURL(p) || filepath.IsAbs(p) || s.dir == "" {
		return p
	}
	return filepath.Join(s.dir, p)
}
