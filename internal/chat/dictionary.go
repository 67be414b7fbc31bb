package chat

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"datachat"
)

// The data dictionary and verified examples in a turn's prompt: the
// descriptions the user gave datasets and columns beside the schema, the
// conversation's notes as business rules, and up to MaxPromptExamples of the
// user's verified examples whose tables have the columns of this
// conversation's. They are part of the system prompt, so the pruning budget
// counts them like the rest of it.

// MaxPromptExamples is how many verified examples a turn's prompt holds at
// most.
const MaxPromptExamples = 3

// PromptExample is a verified example as a prompt shows it.
type PromptExample struct {
	Question string `json:"question"`
	SQL      string `json:"sql"`
	// Renames maps the example's tables to this conversation's tables of the
	// same columns, where their names differ.
	Renames map[string]string `json:"renames,omitempty"`
}

// SelectExamples returns, best first, at most n of the correct examples
// whose question shares words with question, ranked over their questions
// by r (BM25 in the workspace), among those that read at least one table and
// each of whose tables has exactly the columns, with their types, of one of
// the datasets.
func SelectExamples(r Ranker, examples []*datachat.Example, datasets []*datachat.Dataset, question string, n int) []PromptExample {
	if n <= 0 || len(examples) == 0 || len(datasets) == 0 {
		return nil
	}
	sigs := make([]datachat.TableSignature, len(datasets))
	for i, d := range datasets {
		sigs[i] = d.Signature()
	}
	var (
		cands     []*datachat.Example
		renames   []map[string]string
		questions []string
	)
	for _, e := range examples {
		if e.Verdict != datachat.VerdictCorrect || len(e.Tables) == 0 {
			continue
		}
		m, ok := matchTables(e.Tables, sigs)
		if !ok {
			continue
		}
		cands = append(cands, e)
		renames = append(renames, m)
		questions = append(questions, e.Question)
	}
	var out []PromptExample
	for _, i := range r.Rank(question, questions, n) {
		out = append(out, PromptExample{Question: cands[i].Question, SQL: cands[i].SQL, Renames: renames[i]})
	}
	return out
}

// matchTables finds, for each table an example reads, a table of the
// conversation with the same columns — by preference of the same name, then
// one no other table of the example took — and returns the renames needed.
func matchTables(tables []datachat.TableSignature, sigs []datachat.TableSignature) (map[string]string, bool) {
	var renames map[string]string
	taken := map[int]bool{}
	for _, t := range tables {
		best := -1
		for i, s := range sigs {
			if !t.SameColumns(s) {
				continue
			}
			if strings.EqualFold(s.Name, t.Name) {
				best = i
				break
			}
			if best < 0 || taken[best] && !taken[i] {
				best = i
			}
		}
		if best < 0 {
			return nil, false
		}
		taken[best] = true
		if !strings.EqualFold(sigs[best].Name, t.Name) {
			if renames == nil {
				renames = map[string]string{}
			}
			renames[t.Name] = sigs[best].Name
		}
	}
	return renames, true
}

// examplesFor returns the verified examples for a turn's prompt.
func (t *turn) examplesFor(ctx context.Context, question string, datasets []*datachat.Dataset) ([]PromptExample, error) {
	if t.r.NoExamples || len(datasets) == 0 || t.r.Store == nil || t.user == nil {
		return nil, nil
	}
	list, err := t.r.Store.Examples(ctx, t.user.ID)
	if err != nil {
		return nil, err
	}
	return SelectExamples(t.r.Data, list, datasets, question, MaxPromptExamples), nil
}

// promptData is what the turn's system prompt is built from.
func (t *turn) promptData(datasets []*datachat.Dataset, excerpts []datachat.Source) PromptData {
	d := PromptData{
		Datasets: t.schema.Datasets, Excerpts: excerpts, HasDocuments: t.hasDocuments, ConfirmAlways: t.r.ConfirmAlways,
		Sources: t.schema.Sources, Notes: t.conv.Notes, Examples: t.state.Examples,
		OtherTables: t.schema.Others, PartialSchema: t.schema.Partial,
		HiddenDatasets: len(t.schema.Datasets) < len(datasets),
	}
	if t.r.NoDictionary {
		d.Notes = ""
		d.Datasets = withoutDescriptions(d.Datasets)
	}
	return d
}

// withoutDescriptions returns copies of datasets without the dictionary's
// descriptions and semantic layer.
func withoutDescriptions(datasets []*datachat.Dataset) []*datachat.Dataset {
	out := make([]*datachat.Dataset, len(datasets))
	for i, d := range datasets {
		c := *d
		c.Description = ""
		c.Metrics, c.Synonyms, c.Relationships = nil, nil, nil
		c.Columns = slices.Clone(d.Columns)
		for j := range c.Columns {
			c.Columns[j].Description = ""
		}
		out[i] = &c
	}
	return out
}

// oneLine flattens a description to one line for the schema.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// notesText is the prompt's section of business rules, "" without notes.
func notesText(notes string) string {
	notes = strings.TrimSpace(notes)
	if notes == "" {
		return ""
	}
	return "\n\n## Business rules from the user\nThe user gave these rules for this data. Apply them in every query and answer; they win over what the data alone suggests.\n" + notes
}

// examplesText is the prompt's section of verified examples, "" without
// any.
func examplesText(examples []PromptExample) string {
	if len(examples) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n\n## Verified examples (question → SQL)\nThe user checked these queries as correct answers to earlier questions over tables with the same columns as this conversation's. Where a question is alike, follow their logic (filters, joins, definitions); still check the data and answer the question asked.\n")
	for i, e := range examples {
		fmt.Fprintf(&b, "\nExample %d. %s\n```sql\n%s\n```\n", i+1, oneLine(e.Question), strings.TrimSpace(e.SQL))
		for _, from := range slices.Sorted(maps.Keys(e.Renames)) {
			fmt.Fprintf(&b, "(Its table %s is %s here.)\n", from, e.Renames[from])
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

// sourcesWithoutDictionary returns copies of the sources whose tables have
// none of the dictionary's descriptions and semantic layer (the catalog's
// foreign keys stay: they are the engine's).
func sourcesWithoutDictionary(sources []datachat.DBSourceInfo) []datachat.DBSourceInfo {
	out := slices.Clone(sources)
	for i := range out {
		out[i].Tables = slices.Clone(out[i].Tables)
		for j := range out[i].Tables {
			t := &out[i].Tables[j]
			t.Description, t.Metrics, t.Synonyms, t.Relationships = "", nil, nil, nil
			t.Columns = slices.Clone(t.Columns)
			for k := range t.Columns {
				t.Columns[k].Description = ""
			}
		}
	}
	return out
}
