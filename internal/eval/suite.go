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
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"datachat"
	"datachat/internal/workspace"
	"datachat/internal/yamlsafe"
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
	// Sources are database sources attached to every question's
	// conversation.
	Sources []Source `json:"sources,omitempty" yaml:"sources,omitempty"`

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
	// Unanswerable marks a question the data cannot answer: it is scored
	// on abstention — the answer must contain every one of Missing (what it
	// should say is missing, e.g. "refund") and none of Guesses (the values
	// a guess or a proxy would give).
	Unanswerable bool      `json:"unanswerable,omitempty" yaml:"unanswerable,omitempty"`
	Missing      []string  `json:"missing,omitempty" yaml:"missing,omitempty"`
	Guesses      []float64 `json:"guesses,omitempty" yaml:"guesses,omitempty"`
	// Source is the database source (of the suite's sources) the gold SQL
	// runs in; "" for the datasets.
	Source string `json:"source,omitempty" yaml:"source,omitempty"`
	// Tables are the tables the question needs — a dataset's name, or
	// SOURCE.SCHEMA.TABLE — for recall@prompt: whether the prompt
	// described them all.
	Tables []string `json:"tables,omitempty" yaml:"tables,omitempty"`
}

// Source is a database source a suite attaches to its questions'
// conversations. Its URL is never in the suite (it carries a password): it
// is read from the environment variable URLEnv.
type Source struct {
	Name   string   `json:"name" yaml:"name"`
	URLEnv string   `json:"url_env" yaml:"url_env"`
	Tables []string `json:"tables,omitempty" yaml:"tables,omitempty"` // --tables patterns; default every table of the default schema
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

// MaxSuiteBytes caps a suite file.
const MaxSuiteBytes = 4 << 20

// Load reads a suite file, JSON or YAML, and checks it: every question has
// an id (unique), a question and datasets; an example has a question, its
// SQL and datasets. The file is read under internal/yamlsafe's limits, so a
// small hostile suite (aliases or merge keys fanning out, deep nesting)
// is refused at once; ctx ending stops the reading.
func Load(ctx context.Context, path string) (*Suite, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxSuiteBytes+1))
	f.Close()
	if err != nil {
		return nil, err
	}
	var s Suite
	err = yamlsafe.Unmarshal(ctx, b, &s, yamlsafe.Options{What: "suite " + path, Strict: true,
		MaxBytes: MaxSuiteBytes, MaxValues: 250_000, MaxExpanded: 500_000})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
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
		case len(q.Datasets) == 0 && len(q.Documents) == 0 && len(s.Sources) == 0:
			return fmt.Errorf("question %s has no datasets (nor documents, nor the suite sources)", q.ID)
		case q.Unanswerable && (q.SQL != "" || q.Expected != nil || len(q.Numbers) > 0):
			return fmt.Errorf("question %s is unanswerable: give missing (and guesses), not sql, expected or numbers", q.ID)
		case q.Unanswerable && len(q.Missing) == 0:
			return fmt.Errorf("question %s is unanswerable: give missing, the words its answer must say are missing", q.ID)
		case !q.Unanswerable && (len(q.Missing) > 0 || len(q.Guesses) > 0):
			return fmt.Errorf("question %s: missing and guesses are for unanswerable questions", q.ID)
		case q.Source != "" && !slices.ContainsFunc(s.Sources, func(src Source) bool { return src.Name == q.Source }):
			return fmt.Errorf("question %s: source %q is not one of the suite's sources", q.ID, q.Source)
		case q.Expected != nil && q.Expected.Rows == nil:
			return fmt.Errorf("question %s: expected has no rows (write rows: [] for an empty result)", q.ID)
		}
		seen[q.ID] = true
	}
	for i, src := range s.Sources {
		if strings.TrimSpace(src.Name) == "" || strings.TrimSpace(src.URLEnv) == "" {
			return fmt.Errorf("source %d: give its name and url_env (the environment variable holding its URL)", i+1)
		}
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
