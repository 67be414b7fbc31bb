package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"datachat"
)

// chargeLog records what is charged and refuses what refuse names.
type chargeLog struct {
	charged []string // "user budget"
	refuse  Budget
}

func (c *chargeLog) Charge(userID string, b Budget) error {
	c.charged = append(c.charged, fmt.Sprint(userID, " ", b))
	if b == c.refuse {
		return datachat.Errorf(datachat.ERATELIMIT, "Too many SQL queries.")
	}
	return nil
}

// TestRunChargesAndObserves: Run charges the user's budget of each tool
// before running it (a refusal is the call's answer and nothing runs),
// charges nothing for arguments it refuses, and observes every call it
// answers.
func TestRunChargesAndObserves(t *testing.T) {
	cat, ws, _, obs := newCatalog()
	budgets := &chargeLog{refuse: SearchBudget}
	cat.Budgets = budgets
	if _, err := run(t, cat, datachat.ToolExecuteSQL, `{"query": "SELECT 1"}`); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, cat, datachat.ToolListDatasets, `{}`); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, cat, datachat.ToolSearchDocuments, `{"query": "refunds"}`); datachat.ErrorCode(err) != datachat.ERATELIMIT {
		t.Errorf("search over its budget: %v, want ERATELIMIT", err)
	}
	if ws.search.Text != "" {
		t.Errorf("a refused search ran: %+v", ws.search)
	}
	if _, err := run(t, cat, datachat.ToolExecuteSQL, `{}`); datachat.ErrorCode(err) != datachat.EINVALID {
		t.Errorf("no query: %v, want EINVALID", err)
	}
	if want := []string{fmt.Sprint("u1 ", SQLBudget), fmt.Sprint("u1 ", NoBudget), fmt.Sprint("u1 ", SearchBudget)}; !reflect.DeepEqual(budgets.charged, want) {
		t.Errorf("charged %q, want %q", budgets.charged, want)
	}
	if want := []string{"execute_sql:true", "list_datasets:true", "search_documents:false", "execute_sql:false"}; !reflect.DeepEqual(obs.tools, want) {
		t.Errorf("observed %q, want %q", obs.tools, want)
	}
}

// convs has alice's conversation c1.
type convs struct{}

func (convs) Conversation(ctx context.Context, userID, id string) (*datachat.Conversation, error) {
	if userID != alice.ID || id != "c1" {
		return nil, datachat.Errorf(datachat.ENOTFOUND, "no")
	}
	return &datachat.Conversation{ID: id, Notes: "Amounts are in cents."}, nil
}

// TestRunFindsTheConversation: a call without its conversation takes the
// conversation_id of its arguments, which must be the user's; one that is
// not is named in the error, clipped.
func TestRunFindsTheConversation(t *testing.T) {
	cat, _, _, _ := newCatalog()
	cat.Conversations = convs{}
	ctx := context.Background()
	for args, want := range map[string]string{
		`{"conversation_id": "c1"}`: "",
		`{}`:                        "conversation_id is required.",
		`{"conversation_id": "c2"}`: `Conversation "c2" not found.`,
		`{"conversation_id": "` + strings.Repeat("é", 100_000) + `"}`: `Conversation "` + strings.Repeat("é", 63) + `…" not found.`,
	} {
		_, err := cat.Run(ctx, Call{User: alice}, datachat.ToolListDatasets, json.RawMessage(args))
		if got := datachat.ErrorMessage(err); err != nil && got != want || err == nil && want != "" {
			t.Errorf("%s: %v, want %q", args, err, want)
		}
	}
}

// TestDatasetsText: list_datasets and describe_dataset answer the model a
// text, as the chat gives them too.
func TestDatasetsText(t *testing.T) {
	cat, _, _, _ := newCatalog()
	cat.Conversations = convs{}
	res, err := run(t, cat, datachat.ToolListDatasets, `{}`)
	want := "1 dataset, queried with execute_sql without source (DuckDB SQL):\n- sales: 3 rows, from sales.csv\n(schema of 1 tables)\n" +
		`Database warehouse (postgres): execute_sql with "source": "warehouse"; 2 tables to read (list_tables names them, describe_table gives their columns).`
	if err != nil || res.Text != want {
		t.Errorf("list_datasets: %v\n%s\nwant\n%s", err, res.Text, want)
	}
	res, err = run(t, cat, datachat.ToolDescribeDataset, `{"name": "sales"}`)
	if err != nil || !strings.HasPrefix(res.Text, "Dataset sales: 3 rows, from sales.csv.\n(schema of 1 tables)\nIts first rows:\n") || !strings.HasSuffix(res.Text, "business rules:\nAmounts are in cents.") {
		t.Errorf("describe_dataset: %v\n%s", err, res.Text)
	}
	if _, err := run(t, cat, datachat.ToolDescribeDataset, `{}`); datachat.ErrorCode(err) != datachat.EINVALID || !strings.Contains(err.Error(), "name is required") {
		t.Errorf("describe_dataset without a name: %v", err)
	}
}

// TestSpec: execute_sql's declaration takes a source only when there are
// sources, narrowed to the attached ones when they are known.
func TestSpec(t *testing.T) {
	cat, _, _, _ := newCatalog()
	for _, tc := range []struct {
		cat      *Catalog
		attached []string
		want     string
	}{
		{cat, nil, string(datachat.ExecuteSQLSourcesSpec.Parameters)},
		{cat, []string{}, string(datachat.ExecuteSQLSpec.Parameters)},
		{&Catalog{}, nil, string(datachat.ExecuteSQLSpec.Parameters)},
		{cat, []string{"warehouse"}, `"enum":["warehouse"]`},
	} {
		spec, ok := tc.cat.Spec(datachat.ToolExecuteSQL, tc.attached)
		if !ok || !strings.Contains(string(spec.Parameters), tc.want) {
			t.Errorf("sources %t, attached %q: %s, want %s", tc.cat.Sources != nil, tc.attached, spec.Parameters, tc.want)
		}
	}
	if _, ok := cat.Spec(datachat.ToolRequestConfirmation, nil); ok {
		t.Errorf("the catalog declares request_confirmation")
	}
}
