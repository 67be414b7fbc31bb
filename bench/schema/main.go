// Command schema measures how the chat finds the tables a question needs in
// a database too large for its prompt: it makes bench/schema/wide's database
// of 500 tables on a PostgreSQL cluster, then runs `datachat eval` on
// bench/schema/suite.yaml (30 questions, each listing the tables it needs,
// and 3 no table answers) with a scripted model that uses only what its
// prompt shows, once per schema budget, and reports recall@prompt (the
// share of questions whose tables the prompt described), the largest system
// prompt, the describe_table calls the model needed for the rest, and the
// abstention on the questions it cannot answer (after a list_tables).
//
//	export DATACHAT_TEST_POSTGRES_URL=$(bash internal/postgres/testdata/start-test-cluster.sh)
//	go run ./bench/schema                          # budgets 2000, 4000, 8000 (the default)
//	go run ./bench/schema -budgets 8000 -keep      # keep the database, print its URL
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"datachat/bench/internal/serve"
	"datachat/bench/schema/wide"
	"datachat/internal/dbsource/dbsourcetest"
	"datachat/internal/eval"
	"datachat/internal/llmtest"
)

func main() {
	base := flag.String("postgres-url", os.Getenv("DATACHAT_TEST_POSTGRES_URL"), "a superuser URL of the cluster (default $DATACHAT_TEST_POSTGRES_URL)")
	budgets := flag.String("budgets", "2000,4000,8000", "schema budgets (DATACHAT_SCHEMA_BUDGET, tokens) to measure, comma-separated")
	bin := flag.String("bin", "", "datachat binary to run (default: go build ./cmd/datachat into a temp dir)")
	keep := flag.Bool("keep", false, "keep the database and print its reader's URL")
	flag.Parse()
	log.SetFlags(0)
	if *base == "" {
		log.Fatal("set DATACHAT_TEST_POSTGRES_URL or -postgres-url (internal/postgres/testdata/start-test-cluster.sh starts a cluster)")
	}
	ctx := context.Background()
	tmp, done, err := serve.WorkDir("schema", false)
	if err != nil {
		log.Fatal(err)
	}
	defer done()
	if *bin, err = serve.Binary(tmp, *bin); err != nil {
		log.Fatal(err)
	}

	sfx := dbsourcetest.Suffix()
	db, role, pw := "dcwide_"+sfx, "dcwide_reader_"+sfx, "pw-"+sfx
	root, err := pgx.Connect(ctx, *base)
	if err != nil {
		log.Fatal(err)
	}
	for _, q := range []string{"CREATE DATABASE " + db, fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", role, pw)} {
		if _, err := root.Exec(ctx, q); err != nil {
			log.Fatal(err)
		}
	}
	root.Close(ctx)
	if !*keep {
		defer dbsourcetest.DropPostgres(*base, db, role)
	}
	c, err := pgx.Connect(ctx, dbsourcetest.WithDB(*base, db, "", ""))
	if err != nil {
		log.Fatal(err)
	}
	start := time.Now()
	if err := wide.Create(ctx, c, role); err != nil {
		log.Fatal(err)
	}
	c.Close(ctx)
	url := dbsourcetest.WithDB(*base, db, role, pw)
	fmt.Printf("made %d tables in %s (%.1f s)\n\n", wide.Count(), db, time.Since(start).Seconds())

	const suitePath = "bench/schema/suite.yaml"
	suite, err := eval.Load(ctx, suitePath)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("budget (tokens)  recall@prompt     largest system prompt (tokens)  describe_table calls  execution accuracy  abstention       seconds")
	for _, b := range strings.Split(*budgets, ",") {
		budget, err := strconv.Atoi(strings.TrimSpace(b))
		if err != nil {
			log.Fatalf("-budgets: %v", err)
		}
		fake, err := llmtest.Start(llmtest.OpenAI, wide.Script(suite), "127.0.0.1:0")
		if err != nil {
			log.Fatal(err)
		}
		out := filepath.Join(tmp, fmt.Sprintf("budget-%d.json", budget))
		cmd := exec.Command(*bin, "eval", suitePath, "--out", out)
		cmd.Env = append(os.Environ(), "OPENAI_API_KEY=k", "OPENAI_BASE_URL="+fake.URL, "DATACHAT_EVAL_WAREHOUSE_URL="+url,
			"DATACHAT_SCHEMA_BUDGET="+strconv.Itoa(budget), "DATACHAT_DATA_DIR="+filepath.Join(tmp, "data"), "LLM_PROVIDER=openai")
		t0 := time.Now()
		if o, err := cmd.CombinedOutput(); err != nil {
			log.Fatalf("datachat eval: %v\n%s", err, o)
		}
		secs := time.Since(t0).Seconds()
		fake.Close()
		rep, err := eval.ReadReport(out)
		if err != nil {
			log.Fatal(err)
		}
		t := rep.Totals
		fmt.Printf("%-16d %-17s %-31d %-21d %-19s %-16s %.1f\n", budget, pct(rep.RecallAtPrompt, t.TablesInPrompt, t.TablesScored),
			t.MaxPromptTokens, t.DescribeTableCalls, pct(rep.ExecutionAccuracy, t.ExecutionMatches, t.ExecutionScored),
			pct(rep.AbstentionAccuracy, t.AbstainMatches, t.AbstainScored), secs)
		for _, q := range rep.Questions {
			if len(q.MissingTables) > 0 {
				fmt.Printf("    %s: not in the prompt: %s\n", q.ID, strings.Join(q.MissingTables, ", "))
			}
		}
	}
	if *keep {
		fmt.Printf("\nthe database is kept: DATACHAT_EVAL_WAREHOUSE_URL=%s\n", url)
	}
}

func pct(a *float64, n, of int) string {
	if a == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f%% (%d/%d)", *a*100, n, of)
}
