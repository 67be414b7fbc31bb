package eval

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Report is the result of a run, as `datachat eval --out` writes it.
type Report struct {
	Name         string `json:"name"`
	Provider     string `json:"provider"`
	Model        string `json:"model"`
	NoDictionary bool   `json:"no_dictionary"`
	NoExamples   bool   `json:"no_examples"`
	// ExecutionAccuracy and AnswerAccuracy are the shares of the questions
	// to which the match applies that match; null when it applies to none.
	ExecutionAccuracy *float64 `json:"execution_accuracy"`
	AnswerAccuracy    *float64 `json:"answer_accuracy"`
	// AbstentionAccuracy is the share of the unanswerable questions whose
	// answer said what is missing without guessing; null without any.
	AbstentionAccuracy *float64 `json:"abstention_accuracy,omitempty"`
	// RecallAtPrompt is the share of the questions giving their tables
	// whose prompt described every one of them; null when none gives them.
	RecallAtPrompt *float64 `json:"recall_at_prompt,omitempty"`
	Totals         Totals   `json:"totals"`
	Questions      []Result `json:"questions"`
	Warnings       []string `json:"warnings,omitempty"`
}

// Totals sum the questions' counts.
type Totals struct {
	ExecutionMatches int     `json:"execution_matches"`
	ExecutionScored  int     `json:"execution_scored"`
	AnswerMatches    int     `json:"answer_matches"`
	AnswerScored     int     `json:"answer_scored"`
	ToolCalls        int     `json:"tool_calls"`
	FailedSQL        int     `json:"failed_sql"`
	InputTokens      int64   `json:"input_tokens"`
	OutputTokens     int64   `json:"output_tokens"`
	Seconds          float64 `json:"seconds"`
	Errors           int     `json:"errors"`
	AbstainMatches   int     `json:"abstain_matches,omitempty"`
	AbstainScored    int     `json:"abstain_scored,omitempty"`
	// TablesInPrompt of TablesScored questions had their tables in the
	// prompt; MaxPromptTokens is the largest system prompt (characters / 4);
	// DescribeTableCalls and ListTablesCalls count the model's calls.
	TablesInPrompt     int   `json:"tables_in_prompt,omitempty"`
	TablesScored       int   `json:"tables_scored,omitempty"`
	MaxPromptTokens    int64 `json:"max_prompt_tokens,omitempty"`
	DescribeTableCalls int   `json:"describe_table_calls,omitempty"`
	ListTablesCalls    int   `json:"list_tables_calls,omitempty"`
}

// Result is one question's score. A match that does not apply is null.
type Result struct {
	ID             string  `json:"id"`
	ExecutionMatch *bool   `json:"execution_match"`
	AnswerMatch    *bool   `json:"answer_match"`
	SQL            string  `json:"sql"` // the turn's last successful query, scored
	ToolCalls      int     `json:"tool_calls"`
	FailedSQL      int     `json:"failed_sql"`
	InputTokens    int64   `json:"input_tokens"`
	OutputTokens   int64   `json:"output_tokens"`
	Seconds        float64 `json:"seconds"`
	Error          *string `json:"error"`
	// Answer is the answer's text; MissingNumbers the numbers it lacks.
	Answer         string    `json:"answer"`
	MissingNumbers []float64 `json:"missing_numbers,omitempty"`
	// AbstainMatch scores an unanswerable question (null for the others):
	// its answer said every word of its missing and gave none of its
	// guesses; Unsaid and Guessed are what it did not say and what it gave.
	AbstainMatch *bool     `json:"abstain_match,omitempty"`
	Unsaid       []string  `json:"unsaid,omitempty"`
	Guessed      []float64 `json:"guessed,omitempty"`
	// TablesInPrompt says whether the prompt described every table the
	// question needs (null when it names none), MissingTables those it did
	// not; PromptTables is how many it described, PromptTokens its size
	// (characters / 4). DescribeTable are the names the model gave
	// describe_table, ListTables how often it called list_tables.
	TablesInPrompt *bool    `json:"tables_in_prompt,omitempty"`
	MissingTables  []string `json:"missing_tables,omitempty"`
	PromptTables   int      `json:"prompt_tables,omitempty"`
	PromptTokens   int64    `json:"prompt_tokens,omitempty"`
	DescribeTable  []string `json:"describe_table_calls,omitempty"`
	ListTables     int      `json:"list_tables_calls,omitempty"`
}

func (r *Report) summarize() {
	t := Totals{}
	for _, q := range r.Questions {
		tally(q.ExecutionMatch, &t.ExecutionScored, &t.ExecutionMatches)
		tally(q.AnswerMatch, &t.AnswerScored, &t.AnswerMatches)
		t.ToolCalls += q.ToolCalls
		t.FailedSQL += q.FailedSQL
		t.InputTokens += q.InputTokens
		t.OutputTokens += q.OutputTokens
		t.Seconds += q.Seconds
		if q.Error != nil {
			t.Errors++
		}
		tally(q.AbstainMatch, &t.AbstainScored, &t.AbstainMatches)
		tally(q.TablesInPrompt, &t.TablesScored, &t.TablesInPrompt)
		t.MaxPromptTokens = max(t.MaxPromptTokens, q.PromptTokens)
		t.DescribeTableCalls += len(q.DescribeTable)
		t.ListTablesCalls += q.ListTables
	}
	r.Totals = t
	r.RecallAtPrompt = share(t.TablesInPrompt, t.TablesScored)
	r.AbstentionAccuracy = share(t.AbstainMatches, t.AbstainScored)
	r.ExecutionAccuracy = share(t.ExecutionMatches, t.ExecutionScored)
	r.AnswerAccuracy = share(t.AnswerMatches, t.AnswerScored)
}

// tally counts a match that applies (not null) in scored, and in matched
// when it holds.
func tally(match *bool, scored, matched *int) {
	if match != nil {
		*scored++
		if *match {
			*matched++
		}
	}
}

func share(n, of int) *float64 {
	if of == 0 {
		return nil
	}
	v := float64(n) / float64(of)
	return &v
}

// WriteJSON writes the report to path.
func (r *Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// ReadReport reads a report written by WriteJSON.
func ReadReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: not an eval result: %w", path, err)
	}
	if r.Questions == nil {
		return nil, fmt.Errorf("%s: not an eval result: no questions", path)
	}
	r.summarize()
	return &r, nil
}

func mark(b *bool) string {
	switch {
	case b == nil:
		return "-"
	case *b:
		return "yes"
	}
	return "no"
}

func accuracy(a *float64, n, of int) string {
	if a == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f%% (%d/%d)", *a*100, n, of)
}

// WriteTable writes the report as a table, one line per question and a
// total.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "id\texecution\tanswer\ttool calls\tfailed SQL\tinput tokens\toutput tokens\tseconds\terror")
	for _, q := range r.Questions {
		errText := ""
		if q.Error != nil {
			errText = oneLine(*q.Error, 60)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%.1f\t%s\n", q.ID, mark(q.ExecutionMatch), mark(q.AnswerMatch),
			q.ToolCalls, q.FailedSQL, q.InputTokens, q.OutputTokens, q.Seconds, errText)
	}
	t := r.Totals
	fmt.Fprintf(tw, "total\t%s\t%s\t%d\t%d\t%d\t%d\t%.1f\t%s\n",
		accuracy(r.ExecutionAccuracy, t.ExecutionMatches, t.ExecutionScored), accuracy(r.AnswerAccuracy, t.AnswerMatches, t.AnswerScored),
		t.ToolCalls, t.FailedSQL, t.InputTokens, t.OutputTokens, t.Seconds, plural(t.Errors, "error"))
	if err := tw.Flush(); err != nil {
		return err
	}
	levers := "dictionary and examples on"
	switch {
	case r.NoDictionary && r.NoExamples:
		levers = "no dictionary, no examples"
	case r.NoDictionary:
		levers = "no dictionary"
	case r.NoExamples:
		levers = "no examples"
	}
	_, err := fmt.Fprintf(w, "\n%s: %s/%s, %s; execution accuracy %s, answer accuracy %s\n", r.Name, r.Provider, r.Model, levers,
		accuracy(r.ExecutionAccuracy, t.ExecutionMatches, t.ExecutionScored), accuracy(r.AnswerAccuracy, t.AnswerMatches, t.AnswerScored))
	if r.AbstentionAccuracy != nil {
		fmt.Fprintf(w, "abstention accuracy %s (the unanswerable questions whose answer said what is missing, without guessing)\n",
			accuracy(r.AbstentionAccuracy, t.AbstainMatches, t.AbstainScored))
		for _, q := range r.Questions {
			if q.AbstainMatch != nil && !*q.AbstainMatch {
				fmt.Fprintf(w, "  %s: did not say %q%s\n", q.ID, q.Unsaid, guessNote(q.Guessed))
			}
		}
	}
	if r.RecallAtPrompt != nil {
		fmt.Fprintf(w, "recall@prompt %s (the questions whose tables the prompt described); largest system prompt %d tokens; describe_table calls %d, list_tables calls %d\n",
			accuracy(r.RecallAtPrompt, t.TablesInPrompt, t.TablesScored), t.MaxPromptTokens, t.DescribeTableCalls, t.ListTablesCalls)
		for _, q := range r.Questions {
			if len(q.MissingTables) > 0 {
				fmt.Fprintf(w, "  %s: not in the prompt: %s\n", q.ID, strings.Join(q.MissingTables, ", "))
			}
		}
	}
	for _, warn := range r.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
	return err
}

// Compare writes two reports side by side: each question's matches in a
// and b, marking those that changed, then the totals and their change.
func Compare(w io.Writer, a, b *Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "id\texecution A\texecution B\tanswer A\tanswer B\ttokens A\ttokens B\tseconds A\tseconds B\t")
	byID := map[string]*Result{}
	for i := range b.Questions {
		byID[b.Questions[i].ID] = &b.Questions[i]
	}
	seen := map[string]bool{}
	row := func(id string, qa, qb *Result) {
		cell := func(q *Result, f func(*Result) string) string {
			if q == nil {
				return "absent"
			}
			return f(q)
		}
		exec := func(q *Result) string { return mark(q.ExecutionMatch) }
		ans := func(q *Result) string { return mark(q.AnswerMatch) }
		tok := func(q *Result) string { return strconv.FormatInt(q.InputTokens+q.OutputTokens, 10) }
		sec := func(q *Result) string { return fmt.Sprintf("%.1f", q.Seconds) }
		change := ""
		if cell(qa, exec) != cell(qb, exec) || cell(qa, ans) != cell(qb, ans) {
			change = "changed"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", id, cell(qa, exec), cell(qb, exec), cell(qa, ans), cell(qb, ans),
			cell(qa, tok), cell(qb, tok), cell(qa, sec), cell(qb, sec), change)
	}
	for i := range a.Questions {
		qa := &a.Questions[i]
		seen[qa.ID] = true
		row(qa.ID, qa, byID[qa.ID])
	}
	for i := range b.Questions {
		if qb := &b.Questions[i]; !seen[qb.ID] {
			row(qb.ID, nil, qb)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	ta, tb := a.Totals, b.Totals
	fmt.Fprintf(w, "\nA: %s, %s/%s%s\nB: %s, %s/%s%s\n", a.Name, a.Provider, a.Model, leverNote(a), b.Name, b.Provider, b.Model, leverNote(b))
	fmt.Fprintf(w, "execution accuracy  A %s  B %s  %s\n", accuracy(a.ExecutionAccuracy, ta.ExecutionMatches, ta.ExecutionScored),
		accuracy(b.ExecutionAccuracy, tb.ExecutionMatches, tb.ExecutionScored), delta(a.ExecutionAccuracy, b.ExecutionAccuracy))
	fmt.Fprintf(w, "answer accuracy     A %s  B %s  %s\n", accuracy(a.AnswerAccuracy, ta.AnswerMatches, ta.AnswerScored),
		accuracy(b.AnswerAccuracy, tb.AnswerMatches, tb.AnswerScored), delta(a.AnswerAccuracy, b.AnswerAccuracy))
	fmt.Fprintf(w, "tool calls          A %d  B %d\nfailed SQL          A %d  B %d\ntokens              A %d  B %d\nseconds             A %.1f  B %.1f\n",
		ta.ToolCalls, tb.ToolCalls, ta.FailedSQL, tb.FailedSQL, ta.InputTokens+ta.OutputTokens, tb.InputTokens+tb.OutputTokens, ta.Seconds, tb.Seconds)
	return nil
}

func leverNote(r *Report) string {
	var off []string
	if r.NoDictionary {
		off = append(off, "no dictionary")
	}
	if r.NoExamples {
		off = append(off, "no examples")
	}
	if len(off) == 0 {
		return ""
	}
	return " (" + strings.Join(off, ", ") + ")"
}

// delta is B's accuracy minus A's, in percentage points.
func delta(a, b *float64) string {
	if a == nil || b == nil {
		return ""
	}
	return fmt.Sprintf("(%+.1f points)", (*b-*a)*100)
}

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return s
}

func plural(n int, noun string) string {
	switch n {
	case 0:
		return ""
	case 1:
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func guessNote(g []float64) string {
	if len(g) == 0 {
		return ""
	}
	return fmt.Sprintf(", guessed %v", g)
}
