package chat

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"datachat"
	"datachat/internal/llmtest"
)

// metricData is one dataset, orders, with a semantic layer, whose queries
// answer the metric revenue's statement with 1234.5 (and record every
// statement).
type metricData struct {
	benchData
	mu      sync.Mutex
	queries []string
}

func (d *metricData) Datasets(context.Context, string) ([]*datachat.Dataset, error) {
	return []*datachat.Dataset{{ID: "d1", Name: "orders", Source: "orders.csv", RowCount: 3,
		Columns:       []datachat.Column{{Name: "amount", Type: "decimal"}, {Name: "status", Type: "text"}, {Name: "region", Type: "text"}},
		Metrics:       map[string]datachat.Metric{"revenue": {SQL: "sum(amount)", Filter: "status = 'paid'", Description: "Paid orders only."}},
		Synonyms:      map[string]string{"EMEA": "region IN ('DE', 'FR')", "turnover": "revenue"},
		Relationships: []datachat.ForeignKey{{Columns: []string{"region"}, RefTable: "regions", RefColumns: []string{"code"}}},
	}}, nil
}

func (d *metricData) Query(_ context.Context, _ string, sql string) (*datachat.QueryResult, error) {
	d.mu.Lock()
	d.queries = append(d.queries, sql)
	d.mu.Unlock()
	if sql == `SELECT sum(amount) AS metric FROM "orders" WHERE status = 'paid'` {
		return &datachat.QueryResult{Columns: []datachat.Column{{Name: "metric", Type: "decimal"}}, Rows: [][]any{{"1234.50"}}, RowCount: 1}, nil
	}
	return nil, datachat.Errorf(datachat.EINVALID, "unexpected query %s", sql)
}

// TestSemanticLayer: a dataset's metrics, synonyms and relationships reach
// the prompt beside its columns; an answer naming a metric (or a synonym of
// it) has the metric computed as defined, and a number equal to its value
// is matched to it ({"metric": "revenue"}), while a number no evidence
// holds stays unmatched; an answer naming no metric computes none.
func TestSemanticLayer(t *testing.T) {
	f := newTurnFixture(t, llmtest.Script{Turns: []llmtest.Turn{
		{Match: &llmtest.Match{LastRole: "user", Contains: "revenue"}, Text: []string{"The turnover was 1,234.50, and 999 orders."}},
		{Match: &llmtest.Match{LastRole: "user", Contains: "hello"}, Text: []string{"There are 77 things."}},
	}})
	data := &metricData{}
	f.r.Data, f.r.CheckNumbers = data, true
	if _, _, err := f.send(t, "What was the revenue?"); err != nil {
		t.Fatal(err)
	}
	system := f.fake.ChatRequests()[0].Messages[0].Text
	for _, w := range []string{
		`Metrics (compute each exactly as defined): revenue = sum(amount) WHERE status = 'paid' (Paid orders only.)`,
		`Synonyms: "EMEA" means region IN ('DE', 'FR'); "turnover" means revenue`,
		`Joins: region → regions.code`,
	} {
		if !strings.Contains(system, w) {
			t.Errorf("the prompt lacks %q:\n%s", w, system)
		}
	}
	checks := f.answer(t).NumberChecks
	got := map[string]string{}
	for _, c := range checks {
		got[c.Text] = c.Status + " " + string(c.Source)
	}
	if got["1,234.50"] != `matched {"metric":"revenue"}` || got["999"] != "unmatched null" {
		b, _ := json.Marshal(checks)
		t.Errorf("number checks %s", b)
	}
	if len(data.queries) != 1 {
		t.Errorf("queries %q, want the metric's alone", data.queries)
	}
	if _, _, err := f.send(t, "hello"); err != nil {
		t.Fatal(err)
	}
	if len(data.queries) != 1 {
		t.Errorf("an answer naming no metric ran %q", data.queries[1:])
	}
}
