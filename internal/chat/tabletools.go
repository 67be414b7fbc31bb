package chat

import (
	"context"

	"datachat"
)

// list_tables and describe_table reach the tables the prompt leaves out;
// the catalog (internal/tools) runs them over the tables as the turn sees
// them, describing a table as the prompt would.

// tableText is a table as the prompt describes it, for describe_table.
func tableText(t datachat.CatalogTable) string {
	if t.Dataset != nil {
		return datasetBlock(t.Dataset)
	}
	return sourceTableBlock(t.Kind, t.Table)
}

// allTables are the conversation's tables as they are now, for list_tables
// and describe_table: its datasets and the databases the turn read, without
// the dictionary when the turn leaves it out. Never nil.
func (t *turn) allTables(ctx context.Context) ([]datachat.CatalogTable, error) {
	datasets, err := t.r.Data.Datasets(ctx, t.conv.ID)
	if err != nil {
		return nil, err
	}
	sources := t.sources
	if t.r.NoDictionary {
		datasets, sources = withoutDescriptions(datasets), sourcesWithoutDictionary(sources)
	}
	tables := datachat.Catalog(datasets, sources)
	if tables == nil {
		tables = []datachat.CatalogTable{}
	}
	return tables, nil
}
