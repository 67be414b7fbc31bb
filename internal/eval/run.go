package eval

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"datachat"
	"datachat/internal/chat"
	"datachat/internal/dbsource"
	"datachat/internal/numcheck"
	"datachat/internal/workspace"
)

// Options are what a run needs: a workspace (a local one: every question
// gets a new conversation in it), the chat runner with the model to
// measure, and the user the conversations and examples belong to.
type Options struct {
	Workspace *workspace.Workspace
	Chat      *chat.Runner
	User      *datachat.User
	// NoDictionary leaves the suite's dictionary out (and any description or
	// notes out of the prompt); NoExamples its verified examples.
	NoDictionary bool
	NoExamples   bool
	// Progress, if set, is called as each question starts (r nil) and ends.
	Progress func(i, total int, q *Question, r *Result)
	// Sources are the database sources of the workspace's store, which the
	// suite's sources are added to (sealed with its key) and attached to
	// every question's conversation; Getenv reads their URLs. Needed only
	// by a suite with sources.
	Sources *workspace.Sources
	Getenv  func(string) string
}

// maxConfirmations bounds the confirmations approved in one question's turn.
const maxConfirmations = 5

// Run runs every question of the suite, one after the other, and scores
// them. It sets NoDictionary and NoExamples on the runner as o says. An
// error that is the suite's (a dataset that does not load, gold SQL that
// fails, a dictionary or example that does not fit) stops the run; a turn
// that fails is the model's, and is scored.
func Run(ctx context.Context, s *Suite, o Options) (*Report, error) {
	o.Chat.NoDictionary, o.Chat.NoExamples = o.NoDictionary, o.NoExamples
	rep := &Report{Name: s.Name, Provider: o.Chat.Provider, Model: o.Chat.ModelID,
		NoDictionary: o.NoDictionary, NoExamples: o.NoExamples, Questions: []Result{}}
	if err := addSources(ctx, s, o); err != nil {
		return nil, err
	}
	if !o.NoExamples {
		for i, e := range s.Examples {
			if err := addExample(ctx, s, o, e); err != nil {
				return nil, fmt.Errorf("example %d (%q): %w", i+1, e.Question, err)
			}
		}
	}
	dictUsed := map[string]bool{}
	for i := range s.Questions {
		q := &s.Questions[i]
		if o.Progress != nil {
			o.Progress(i, len(s.Questions), q, nil)
		}
		r, err := runQuestion(ctx, s, o, q, dictUsed)
		if err != nil {
			return nil, fmt.Errorf("question %s: %w", q.ID, err)
		}
		rep.Questions = append(rep.Questions, *r)
		if o.Progress != nil {
			o.Progress(i, len(s.Questions), q, r)
		}
	}
	if s.Dictionary != nil && !o.NoDictionary {
		for name := range s.Dictionary.Datasets {
			if !dictUsed[strings.ToLower(name)] {
				rep.Warnings = append(rep.Warnings, fmt.Sprintf("the dictionary's table %s is not a table of any question", name))
			}
		}
	}
	rep.summarize()
	return rep, nil
}

// addSources adds the suite's database sources to the workspace's store,
// granted to the run's user, as `datachat sources add` would.
func addSources(ctx context.Context, s *Suite, o Options) error {
	if len(s.Sources) == 0 {
		return nil
	}
	if o.Sources == nil || o.Getenv == nil {
		return fmt.Errorf("the suite has database sources, and this run none")
	}
	sec, _, err := dbsource.LoadSecrets(o.Sources.SecretKey, o.Sources.DataDir)
	if err != nil {
		return err
	}
	for _, src := range s.Sources {
		url := strings.TrimSpace(o.Getenv(src.URLEnv))
		if url == "" {
			return fmt.Errorf("source %s: set %s to its URL (postgres://USER:PASSWORD@HOST:PORT/DB or mysql://…)", src.Name, src.URLEnv)
		}
		def := dbsource.Source{Name: src.Name, URL: url, Tables: slices.Clone(src.Tables), Users: []string{o.User.Name}}
		if err := def.Validate(); err != nil {
			return fmt.Errorf("source %s: %s", src.Name, datachat.ErrorMessage(err))
		}
		sealed, err := sec.Seal(url)
		if err != nil {
			return err
		}
		if err := o.Workspace.Store.CreateDBSource(ctx, &datachat.DBSource{Name: def.Name, Kind: def.Kind, SealedURL: sealed,
			Tables: def.Tables, Users: def.Users, Origin: datachat.OriginCLI}); err != nil {
			return fmt.Errorf("source %s: %s", src.Name, datachat.ErrorMessage(err))
		}
	}
	return nil
}

// newConversation makes a conversation holding the datasets and documents.
func newConversation(ctx context.Context, s *Suite, o Options, title string, datasets, documents []string) (*datachat.Conversation, []*datachat.Dataset, error) {
	conv := &datachat.Conversation{UserID: o.User.ID, Title: title}
	if err := o.Workspace.Store.CreateConversation(ctx, conv); err != nil {
		return nil, nil, err
	}
	var all []*datachat.Dataset
	for _, src := range datasets {
		ds, err := o.Workspace.AddFromPath(ctx, conv.ID, s.path(src))
		if err != nil {
			return nil, nil, fmt.Errorf("dataset %s: %s", src, datachat.ErrorMessage(err))
		}
		all = append(all, ds...)
	}
	for _, p := range documents {
		f, err := os.Open(s.path(p))
		if err != nil {
			return nil, nil, fmt.Errorf("document %s: %w", p, err)
		}
		_, err = o.Workspace.AddDocument(ctx, conv.ID, f, filepath.Base(p), nil)
		f.Close()
		if err != nil {
			return nil, nil, fmt.Errorf("document %s: %s", p, datachat.ErrorMessage(err))
		}
	}
	if o.Sources != nil {
		for _, src := range s.Sources {
			if _, err := o.Sources.Attach(ctx, o.User, conv.ID, src.Name); err != nil {
				return nil, nil, fmt.Errorf("source %s: %s", src.Name, datachat.ErrorMessage(err))
			}
		}
	}
	return conv, all, nil
}

// addExample verifies a suite's example as a user marking it correct does.
func addExample(ctx context.Context, s *Suite, o Options, e Example) error {
	conv, _, err := newConversation(ctx, s, o, "eval example", e.Datasets, nil)
	if err != nil {
		return err
	}
	ex := &datachat.Example{UserID: o.User.ID, ConversationID: conv.ID, Question: e.Question, SQL: e.SQL, Verdict: datachat.VerdictCorrect}
	if _, err := o.Workspace.SaveExample(ctx, ex, true); err != nil {
		return fmt.Errorf("%s", datachat.ErrorMessage(err))
	}
	return nil
}

// dictionaryFor is the part of the suite's dictionary about the tables of a
// conversation (marking those tables used).
func dictionaryFor(d *datachat.Dictionary, datasets []*datachat.Dataset, used map[string]bool) datachat.Dictionary {
	out := datachat.Dictionary{Notes: d.Notes}
	for name, dd := range d.Datasets {
		for _, ds := range datasets {
			if strings.EqualFold(ds.Name, name) {
				if out.Datasets == nil {
					out.Datasets = map[string]datachat.DatasetDictionary{}
				}
				out.Datasets[name] = dd
				used[strings.ToLower(name)] = true
			}
		}
	}
	return out
}

// turnLog is what a question's turn did, from its events.
type turnLog struct {
	mu        sync.Mutex
	calls     map[string]bool
	queries   map[string]string // call id → SQL
	failedSQL int
	lastSQL   string
	lastRows  [][]any
	hasLast   bool
	results   []numcheck.Result
	tokens    strings.Builder
	described []string // describe_table's names
	listed    int      // list_tables calls
}

func (l *turnLog) sink(ev chat.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch d := ev.Data.(type) {
	case chat.TokenEvent:
		l.tokens.WriteString(d.Token)
	case chat.ToolCallStartEvent:
		l.calls[d.ID] = true
		switch d.Tool {
		case datachat.ToolDescribeTable:
			var a struct {
				Name string `json:"name"`
			}
			_ = json.Unmarshal(d.Args, &a)
			l.described = append(l.described, a.Name)
		case datachat.ToolListTables:
			l.listed++
		}
		if d.Tool == datachat.ToolExecuteSQL {
			var a struct {
				Query string `json:"query"`
			}
			_ = json.Unmarshal(d.Args, &a)
			l.queries[d.ID] = a.Query
		}
	case chat.ToolCallResultEvent:
		l.calls[d.ID] = true
		if d.Tool != datachat.ToolExecuteSQL {
			return
		}
		if !d.OK {
			l.failedSQL++
			return
		}
		if d.Columns == nil {
			return // ran without a result (a plain EXPLAIN): not a result to score
		}
		rows := d.Rows
		if rows == nil {
			rows = [][]any{}
		}
		l.lastSQL, l.lastRows, l.hasLast = l.queries[d.ID], rows, true
		res := &datachat.QueryResult{Columns: d.Columns, Rows: rows}
		if d.RowCount != nil {
			res.RowCount = *d.RowCount
		}
		l.results = append(l.results, numcheck.ResultFromQuery(d.ID, res))
	}
}

// runQuestion runs one question in a new conversation and scores it.
func runQuestion(ctx context.Context, s *Suite, o Options, q *Question, dictUsed map[string]bool) (*Result, error) {
	conv, datasets, err := newConversation(ctx, s, o, "eval "+q.ID, q.Datasets, q.Documents)
	if err != nil {
		return nil, err
	}
	if s.Dictionary != nil && !o.NoDictionary {
		d := dictionaryFor(s.Dictionary, datasets, dictUsed)
		if d.Notes != nil || len(d.Datasets) > 0 {
			if err := o.Workspace.Store.UpdateDictionary(ctx, o.User.ID, conv.ID, d); err != nil {
				return nil, fmt.Errorf("dictionary: %s", datachat.ErrorMessage(err))
			}
		}
		if conv, err = o.Workspace.Store.Conversation(ctx, o.User.ID, conv.ID); err != nil {
			return nil, err
		}
	}
	var want [][]any
	switch {
	case q.Expected != nil:
		want = q.Expected.Rows
	case strings.TrimSpace(q.SQL) != "" && q.Source != "":
		res, err := o.Sources.Query(ctx, o.User, conv.ID, q.Source, q.SQL)
		if err != nil {
			return nil, fmt.Errorf("gold sql on %s: %s", q.Source, datachat.ErrorMessage(err))
		}
		want = res.Rows
		if want == nil {
			want = [][]any{}
		}
	case strings.TrimSpace(q.SQL) != "":
		res, err := o.Workspace.Query(ctx, conv.ID, q.SQL)
		if err != nil {
			return nil, fmt.Errorf("gold sql: %s", datachat.ErrorMessage(err))
		}
		want = res.Rows
		if want == nil {
			want = [][]any{}
		}
	}

	log := &turnLog{calls: map[string]bool{}, queries: map[string]string{}}
	start := time.Now()
	out, err := o.Chat.Send(ctx, o.User, conv.ID, q.Question, chat.TurnOptions{}, log.sink)
	for n := 0; err == nil && out != nil && out.Confirmation != nil && n < maxConfirmations; n++ {
		// The user approves what the model asks to confirm.
		out, err = o.Chat.Confirm(ctx, o.User, conv.ID, out.Confirmation.ID, true, "", log.sink)
	}
	r := &Result{ID: q.ID, Seconds: time.Since(start).Seconds()}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err != nil {
		msg := chat.ErrorEventFor(err).Text()
		r.Error = &msg
	} else if out != nil && out.Confirmation != nil {
		msg := fmt.Sprintf("the turn still asked for confirmation after %d approvals", maxConfirmations)
		r.Error = &msg
	}
	answer := log.tokens.String()
	var excerpts []numcheck.Excerpt
	if out != nil {
		r.InputTokens, r.OutputTokens = out.Usage.Input, out.Usage.Output
		if out.Message != nil && out.Message.Content != "" {
			answer = out.Message.Content
		}
		excerpts = numcheck.ExcerptsFromSources(out.Sources)
		r.PromptTables, r.PromptTokens = len(out.PromptTables), chat.EstimateTokens(out.SystemChars)
		if len(q.Tables) > 0 {
			shown := map[string]bool{}
			for _, k := range out.PromptTables {
				shown[strings.ToLower(k)] = true
			}
			for _, k := range q.Tables {
				if !shown[strings.ToLower(k)] {
					r.MissingTables = append(r.MissingTables, k)
				}
			}
			in := len(r.MissingTables) == 0
			r.TablesInPrompt = &in
		}
	}
	r.DescribeTable, r.ListTables = log.described, log.listed
	r.Answer = answer
	r.ToolCalls, r.FailedSQL, r.SQL = len(log.calls), log.failedSQL, log.lastSQL
	if want != nil {
		m := log.hasLast && RowsMatch(log.lastRows, want, q.Ordered)
		r.ExecutionMatch = &m
	}
	if len(q.Numbers) > 0 {
		ok, missing := NumbersFound(answer, q.Numbers, numcheck.Evidence{Question: q.Question, Results: log.results, Excerpts: excerpts})
		r.AnswerMatch = &ok
		r.MissingNumbers = missing
	}
	if q.Unanswerable && r.Error == nil {
		ok, unsaid, guessed := Abstains(answer, q.Missing, q.Guesses, numcheck.Evidence{Question: q.Question, Results: log.results, Excerpts: excerpts})
		r.AbstainMatch, r.Unsaid, r.Guessed = &ok, unsaid, guessed
	} else if q.Unanswerable {
		no := false
		r.AbstainMatch = &no
	}
	return r, nil
}
