package chat

import (
	"reflect"
	"strings"
	"testing"

	"datachat"
)

func penguinsDataset(name string) *datachat.Dataset {
	return &datachat.Dataset{Name: name, Source: "penguins.csv", RowCount: 344, Columns: []datachat.Column{
		{Name: "species", Type: "text", SQLType: "VARCHAR"},
		{Name: "body_mass_g", Type: "integer", SQLType: "BIGINT"},
	}}
}

// TestSelectExamples ranks with the tests' wordRanker; workspace's
// TestRankExamples ranks the same questions by BM25.
func TestSelectExamples(t *testing.T) {
	pen := penguinsDataset("penguins").Signature()
	other := datachat.TableSignature{Name: "sales", Columns: []datachat.SignatureColumn{{Name: "amount", Type: "DOUBLE"}}}
	retyped := penguinsDataset("penguins").Signature()
	retyped.Columns[0].Type = "INTEGER" // body_mass_g as INTEGER: other columns
	ex := func(q, verdict string, tables ...datachat.TableSignature) *datachat.Example {
		return &datachat.Example{Question: q, SQL: "SELECT /* " + q + " */ 1", Verdict: verdict, Tables: tables}
	}
	examples := []*datachat.Example{
		ex("How many penguins per species?", datachat.VerdictCorrect, pen),
		ex("Average body mass per species", datachat.VerdictCorrect, pen),
		ex("Average body mass per species, marked wrong", datachat.VerdictWrong, pen),
		ex("Average sales amount per species", datachat.VerdictCorrect, other),
		ex("Average body mass per species with other types", datachat.VerdictCorrect, retyped),
		ex("Average body mass per species, two tables", datachat.VerdictCorrect, pen, other),
		ex("Average body mass per species, no table", datachat.VerdictCorrect),
		ex("Heaviest species by body mass", datachat.VerdictCorrect, pen),
		ex("Lightest species by body mass", datachat.VerdictCorrect, pen),
	}
	got := SelectExamples(wordRanker{}, examples, []*datachat.Dataset{penguinsDataset("penguins_2")}, "What is the average body mass of each species?", MaxPromptExamples)
	var questions []string
	for _, e := range got {
		questions = append(questions, e.Question)
		if !reflect.DeepEqual(e.Renames, map[string]string{"penguins": "penguins_2"}) {
			t.Errorf("%q: renames %v, want penguins → penguins_2", e.Question, e.Renames)
		}
	}
	want := []string{"Average body mass per species", "Heaviest species by body mass", "Lightest species by body mass"}
	if !reflect.DeepEqual(questions, want) {
		t.Errorf("SelectExamples: got %q, want %q", questions, want)
	}
	if got := SelectExamples(wordRanker{}, examples, []*datachat.Dataset{penguinsDataset("penguins")}, "How many penguins?", 3); len(got) != 1 || got[0].Renames != nil {
		t.Errorf("SelectExamples on a table of the same name: got %+v, want the one example without renames", got)
	}
	if got := SelectExamples(wordRanker{}, examples, []*datachat.Dataset{{Name: "t", Columns: []datachat.Column{{Name: "x", SQLType: "INTEGER"}}}}, "average body mass", 3); len(got) != 0 {
		t.Errorf("SelectExamples over other columns: got %+v, want none", got)
	}
}

func TestPromptDictionary(t *testing.T) {
	d := penguinsDataset("penguins")
	d.Description = "One row per penguin,\nseen on three islands."
	d.Columns[1].Description = "Body mass in grams."
	data := PromptData{
		Datasets: []*datachat.Dataset{d},
		Notes:    "Fiscal year starts in April.",
		Examples: []PromptExample{{Question: "Mean mass?", SQL: "SELECT avg(body_mass_g) FROM penguins", Renames: map[string]string{"penguins": "birds"}}},
	}
	s, err := SystemPrompt(nil, data)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Table penguins (from penguins.csv, 344 rows): One row per penguin, seen on three islands.\n",
		"- body_mass_g: integer — Body mass in grams.\n",
		"## Business rules from the user\n",
		"Fiscal year starts in April.",
		"## Verified examples (question → SQL)\n",
		"Example 1. Mean mass?\n```sql\nSELECT avg(body_mass_g) FROM penguins\n```\n(Its table penguins is birds here.)\n\n## How to query",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("system prompt lacks %q:\n%s", want, s)
		}
	}
	plain, err := SystemPrompt(nil, PromptData{Datasets: []*datachat.Dataset{penguinsDataset("penguins")}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plain, "Business rules") || strings.Contains(plain, "Verified examples") || !strings.Contains(plain, "344 rows):\n- species: text\n") {
		t.Errorf("system prompt without a dictionary:\n%s", plain)
	}
	if !strings.Contains(plain, "344 rows):\n- species: text\n- body_mass_g: integer\n\n\n## How to query") {
		t.Errorf("the prompt without a dictionary changed its layout:\n%s", plain)
	}
}
