package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"datachat/internal/llmtest"
	"datachat/internal/testlog"
)

// TestDictionaryCommand: `datachat dictionary import` applies a dictionary
// file with a semantic layer to a stored conversation, `export` writes it
// back the same (YAML round trip), a file naming what the conversation
// lacks changes nothing; then in a chat turn the metric and synonym reach
// the prompt, and the number the answer gives for the metric is checked
// against the metric's value ({"metric": "revenue"}).
func TestDictionaryCommand(t *testing.T) {
	fake := llmtest.NewServer(t, llmtest.OpenAI, llmtest.Script{Default: &llmtest.Turn{Text: []string{"The turnover was 31,385.75 in fiscal 2023."}}})
	env := testEnv(t, map[string]string{"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": fake.URL})
	m, err := serveLogged(t, env, &testlog.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + m.Addr()
	key, _ := runMainOut(t, env, "keys", "create", "--user", "alice")
	key = strings.TrimSpace(firstLine(key))
	_, conv := do(t, "POST", base+"/api/conversations", key, `{"title":"shop"}`)
	id := conv["id"].(string)
	if st, body := upload(t, base, key, id, "../../bench/eval/example/orders.csv"); st != 201 {
		t.Fatalf("upload: %d %v", st, body)
	}

	file := filepath.Join(t.TempDir(), "dictionary.yaml")
	const text = `notes: Fiscal year 2023 runs from 1 April 2023 to 31 March 2024.
datasets:
  orders:
    description: One row per order.
    columns:
      unit_price: Price of one unit in euros.
    metrics:
      revenue:
        sql: sum(quantity * unit_price)
        filter: NOT refunded AND order_date >= DATE '2023-04-01' AND order_date < DATE '2024-04-01'
        description: Revenue of fiscal 2023, refunds left out.
    synonyms:
      turnover: revenue
      EMEA: region IN ('North', 'East')
`
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := runMainOut(t, env, "dictionary", "import", "--conversation", id, "--user", "alice", file); err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	} else if !strings.Contains(out, "updated: 1 table, the notes") {
		t.Errorf("import said %q", out)
	}
	stdout, stderr, err := runMain(t, env, "dictionary", "export", "--conversation", id, "--user", "alice")
	if err != nil {
		t.Fatalf("export: %v\n%s", err, stderr)
	}
	for _, w := range []string{"sql: sum(quantity * unit_price)", "turnover: revenue", "unit_price: Price of one unit in euros.", "description: One row per order."} {
		if !strings.Contains(stdout, w) {
			t.Errorf("export lacks %q:\n%s", w, stdout)
		}
	}
	// What export wrote imports back to the same.
	again := filepath.Join(t.TempDir(), "again.yaml")
	os.WriteFile(again, []byte(stdout), 0o644)
	if _, err := runMainOut(t, env, "dictionary", "import", "--conversation", id, "--user", "alice", again); err != nil {
		t.Fatal(err)
	}
	if out2, _, _ := runMain(t, env, "dictionary", "export", "--conversation", id, "--user", "alice"); out2 != stdout {
		t.Errorf("export after importing the export:\n%s\nwant\n%s", out2, stdout)
	}
	// What the conversation lacks: refused, nothing changed.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("datasets:\n  orders:\n    metrics: {margin: {sql: sum(profit)}}\n    relationships: [{columns: [customer], ref_table: customers, ref_columns: [code]}]\n"), 0o644)
	if out, err := runMainOut(t, env, "dictionary", "import", "--conversation", id, "--user", "alice", bad); err == nil || !strings.Contains(err.Error(), `ref_table "customers" is not a table here`) {
		t.Errorf("a relationship to a table the conversation lacks: %v\n%s", err, out)
	}
	if _, err := runMainOut(t, env, "dictionary", "export", "--conversation", id, "--user", "bob"); err == nil {
		t.Error("bob exported alice's dictionary")
	}

	// A turn: the prompt holds the metric and synonyms; the answer's
	// "31,385.75" is the metric's value, matched to it.
	_, resp := do(t, "POST", base+"/chat/query", key, `{"query":"What was the turnover?","conversation_id":"`+id+`"}`)
	system := fake.ChatRequests()[0].Messages[0].Text
	if !strings.Contains(system, "Metrics (compute each exactly as defined): revenue = sum(quantity * unit_price) WHERE NOT refunded") ||
		!strings.Contains(system, `"turnover" means revenue`) {
		t.Errorf("the prompt lacks the semantic layer:\n%s", system)
	}
	checks, _ := json.Marshal(resp["number_checks"])
	if !strings.Contains(string(checks), `"text":"31,385.75"`) || !strings.Contains(string(checks), `"source":{"metric":"revenue"}`) {
		t.Errorf("number checks %s, want 31,385.75 matched to the metric revenue", checks)
	}
	_, ds := do(t, "GET", base+"/api/conversations/"+id+"/datasets", key, "")
	if b, _ := json.Marshal(ds); !strings.Contains(string(b), `"metrics":{"revenue":`) {
		t.Errorf("the datasets as the page lists them: %s", b)
	}
}
