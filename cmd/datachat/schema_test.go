package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"datachat/bench/schema/wide"
	"datachat/internal/chat"
	"datachat/internal/dbsource/dbsourcetest"
	"datachat/internal/eval"
	"datachat/internal/llmtest"
)

// newWideWarehouse makes bench/schema/wide's database of 500 tables on the
// test PostgreSQL, with a role that may read them, and returns its URL.
func newWideWarehouse(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	pg := dbsourcetest.NewPostgresDB(t, "dcwide")
	c, err := pgx.Connect(ctx, pg.AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if err := wide.Create(ctx, c, pg.Role); err != nil {
		t.Fatal(err)
	}
	return pg.URL()
}

// TestEvalWideSchema runs bench/schema's suite — 30 questions over a
// PostgreSQL source of 500 tables, and 3 it cannot answer — through `datachat eval` with a fake
// model that uses only what its prompt shows (describe_table for a table
// it lacks): every prompt stays within the schema budget, recall@prompt
// and the describe_table calls are reported, and every question is
// answered right, the tables the prompt lacked reached through
// describe_table; the questions no table answers are answered so, after a
// list_tables search, and scored on it.
func TestEvalWideSchema(t *testing.T) {
	if testing.Short() {
		t.Skip("makes 500 tables")
	}
	url := newWideWarehouse(t)
	const path = "../../bench/schema/suite.yaml"
	suite, err := eval.Load(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	fake := llmtest.NewServer(t, llmtest.OpenAI, wide.Script(suite))
	env := testEnv(t, map[string]string{"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": fake.URL, "DATACHAT_EVAL_WAREHOUSE_URL": url})
	out := filepath.Join(t.TempDir(), "wide.json")
	stdout, stderr, err := runMain(t, env, "eval", path, "--out", out)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	t.Logf("%s", stdout)
	rep, err := eval.ReadReport(out)
	if err != nil {
		t.Fatal(err)
	}
	withTables, unanswerable := 0, 0
	for _, q := range suite.Questions {
		if len(q.Tables) > 0 {
			withTables++
		}
		if q.Unanswerable {
			unanswerable++
		}
	}
	if rep.RecallAtPrompt == nil || rep.Totals.TablesScored != withTables {
		t.Fatalf("recall@prompt %v of %d questions, want the %d giving their tables scored", rep.RecallAtPrompt, rep.Totals.TablesScored, withTables)
	}
	if rep.AbstentionAccuracy == nil || *rep.AbstentionAccuracy != 1 || rep.Totals.AbstainScored != unanswerable || rep.Totals.ListTablesCalls != unanswerable {
		t.Errorf("abstention %v of %d, %d list_tables calls; want the %d unanswerable questions answered so, each after a list_tables",
			rep.AbstentionAccuracy, rep.Totals.AbstainScored, rep.Totals.ListTablesCalls, unanswerable)
	}
	if !strings.Contains(stdout, "recall@prompt ") {
		t.Errorf("the table does not report recall@prompt:\n%s", stdout)
	}
	if rep.ExecutionAccuracy == nil || *rep.ExecutionAccuracy != 1 {
		t.Errorf("execution accuracy %v, want 1: the fake reaches every table", rep.ExecutionAccuracy)
	}
	// The schema budget bounds the prompt: its default, plus the rest of
	// the prompt (instructions, the question).
	for _, q := range rep.Questions {
		if q.PromptTokens > chat.DefaultSchemaBudget+2000 {
			t.Errorf("%s: a prompt of %d tokens, past the schema budget of %d", q.ID, q.PromptTokens, chat.DefaultSchemaBudget)
		}
		if len(q.DescribeTable) != len(q.MissingTables) {
			t.Errorf("%s: describe_table calls %q for the tables the prompt lacked %q", q.ID, q.DescribeTable, q.MissingTables)
		}
	}
	t.Logf("recall@prompt %.3f (%d/%d), largest prompt %d tokens, %d describe_table calls",
		*rep.RecallAtPrompt, rep.Totals.TablesInPrompt, rep.Totals.TablesScored, rep.Totals.MaxPromptTokens, rep.Totals.DescribeTableCalls)
}
