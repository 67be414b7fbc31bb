package tools

import (
	"context"
	"fmt"
	"strings"

	"datachat"
)

// loadDataset downloads a data file into the conversation as new tables.
func (cat *Catalog) loadDataset(ctx context.Context, c Call, a Args) (*Result, error) {
	ds, err := cat.Workspace.LoadURL(ctx, c.Conversation, a.URL, a.Name)
	if err != nil {
		return nil, err
	}
	return &Result{Text: cat.loadedText(ds), Datasets: ds}, nil
}

// loadedText describes the tables a load gave, for the model.
func (cat *Catalog) loadedText(ds []*datachat.Dataset) string {
	names := make([]string, len(ds))
	for i, d := range ds {
		names[i] = d.Name
	}
	what := "table " + names[0]
	if len(ds) > 1 {
		what = "tables " + strings.Join(names, ", ")
	}
	text := fmt.Sprintf("Loaded %s as %s.\n%s", ds[0].Source, what, cat.schemaText(ds))
	for _, d := range ds {
		for _, n := range d.Notes {
			text += fmt.Sprintf("\nNote on %s: %s", d.Name, n)
		}
	}
	return text
}

// searchDocuments finds the excerpts of the conversation's documents that
// best match a's query.
func (cat *Catalog) searchDocuments(ctx context.Context, c Call, a Args) (*Result, error) {
	res, err := cat.Workspace.Search(ctx, c.Conversation, datachat.SearchQuery{Text: a.Query, TopK: datachat.ToolTopK(a.TopK), Filters: c.Filters})
	if err != nil {
		return nil, err
	}
	return &Result{Text: excerptsText(res.Sources, max(1, c.FirstExcerpt)), Excerpts: res.Sources}, nil
}

// excerptsText renders search results for the model, numbered from first.
func excerptsText(sources []datachat.Source, first int) string {
	if len(sources) == 0 {
		return "No matching excerpts."
	}
	var b strings.Builder
	for i, s := range sources {
		fmt.Fprintf(&b, "[%d] %s\n%s\n\n", first+i, s.Citation(), strings.TrimSpace(s.Text))
	}
	return strings.TrimSpace(b.String())
}

// listDatasets lists the conversation's datasets and its databases.
func (cat *Catalog) listDatasets(ctx context.Context, c Call) (*Result, error) {
	ds, dbs, err := cat.data(ctx, c)
	if err != nil {
		return nil, err
	}
	return &Result{Text: cat.datasetsText(ds, dbs), Datasets: ds, Databases: dbs}, nil
}

// datasetsText is list_datasets' answer for the model: the datasets with
// their row counts and columns, then the databases.
func (cat *Catalog) datasetsText(ds []*datachat.Dataset, dbs []datachat.DBSourceInfo) string {
	var b strings.Builder
	if len(ds) == 0 {
		b.WriteString("The conversation has no datasets; add one with load_dataset.\n")
	} else {
		fmt.Fprintf(&b, "%d dataset%s, queried with execute_sql without source (DuckDB SQL):\n", len(ds), plural(len(ds)))
		for _, d := range ds {
			fmt.Fprintf(&b, "- %s: %d row%s, from %s\n", d.Name, d.RowCount, plural(int(d.RowCount)), d.Source)
		}
		if s := cat.schemaText(ds); s != "" {
			b.WriteString(s + "\n")
		}
	}
	for _, s := range dbs {
		fmt.Fprintf(&b, "Database %s (%s): execute_sql with \"source\": %q", s.Name, s.Kind, s.Name)
		if s.Unavailable != "" {
			fmt.Fprintf(&b, "; its tables cannot be listed right now: %s\n", s.Unavailable)
			continue
		}
		fmt.Fprintf(&b, "; %d table%s to read (list_tables names them, describe_table gives their columns).\n", len(s.Tables), plural(len(s.Tables)))
	}
	return strings.TrimSpace(b.String())
}

// data returns the conversation's datasets and its databases.
func (cat *Catalog) data(ctx context.Context, c Call) ([]*datachat.Dataset, []datachat.DBSourceInfo, error) {
	ds, err := cat.Workspace.Datasets(ctx, c.Conversation)
	if err != nil {
		return nil, nil, err
	}
	dbs, err := cat.databases(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	return ds, dbs, nil
}

// databases are the conversation's database sources; none without
// sources or a user.
func (cat *Catalog) databases(ctx context.Context, c Call) ([]datachat.DBSourceInfo, error) {
	if cat.Sources == nil || c.User == nil {
		return nil, nil
	}
	return cat.Sources.Describe(ctx, c.User, c.Conversation)
}

// describeDataset gives one dataset (by table name, in any case, or id),
// its first rows and the conversation's notes.
func (cat *Catalog) describeDataset(ctx context.Context, c Call, a Args) (*Result, error) {
	ds, err := cat.Workspace.Datasets(ctx, c.Conversation)
	if err != nil {
		return nil, err
	}
	var d *datachat.Dataset
	names := make([]string, len(ds))
	for i, x := range ds {
		names[i] = x.Name
		if strings.EqualFold(x.Name, a.Name) || x.ID == a.Name {
			d = x
		}
	}
	if d == nil {
		if len(ds) == 0 {
			return nil, datachat.Errorf(datachat.ENOTFOUND, "No dataset named %q: the conversation has no datasets; add one with load_dataset.", a.Name)
		}
		return nil, datachat.Errorf(datachat.ENOTFOUND, "No dataset named %q; the tables are: %s.", a.Name, strings.Join(names, ", "))
	}
	sample, err := cat.query(ctx, c.Conversation, fmt.Sprintf(`SELECT * FROM %s LIMIT %d`, datachat.QuoteIdent(d.Name), datachat.DescribeDatasetRows))
	if err != nil {
		return nil, err
	}
	out := &Result{Datasets: []*datachat.Dataset{d}, Rows: sample}
	if cat.Conversations != nil && c.User != nil {
		conv, err := cat.Conversations.Conversation(ctx, c.User.ID, c.Conversation)
		if err != nil {
			return nil, err
		}
		out.Notes = conv.Notes
	}
	out.Text = cat.datasetText(d, sample, out.Notes)
	return out, nil
}

// datasetText is describe_dataset's answer for the model: the dataset's
// columns, its first rows and the conversation's business rules.
func (cat *Catalog) datasetText(d *datachat.Dataset, sample *datachat.QueryResult, notes string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Dataset %s: %d row%s, from %s.\n", d.Name, d.RowCount, plural(int(d.RowCount)), d.Source)
	if s := cat.schemaText([]*datachat.Dataset{d}); s != "" {
		b.WriteString(s + "\n")
	}
	fmt.Fprintf(&b, "Its first rows:\n%s\n", datachat.ResultText(sample))
	if n := strings.TrimSpace(notes); n != "" {
		fmt.Fprintf(&b, "The conversation's business rules:\n%s\n", n)
	}
	return strings.TrimSpace(b.String())
}
