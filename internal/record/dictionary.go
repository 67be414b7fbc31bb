package record

import (
	"fmt"

	"datachat"
)

// DescriptionChange is what UpdateDictionary stores for one dataset.
type DescriptionChange struct {
	DatasetID   string
	Description string
	Columns     any // column_descriptions as bound: see [Descriptions]
}

// DescriptionChanges checks d against a conversation's datasets (nil when d
// changes none, since then they need not be read) and returns the
// descriptions to store; EINVALID as [datachat.Dictionary.Resolve].
func DescriptionChanges(d datachat.Dictionary, datasets []*datachat.Dataset) ([]DescriptionChange, error) {
	resolved, err := d.Resolve(datasets)
	if err != nil {
		return nil, err
	}
	var changes []DescriptionChange
	for _, ds := range datasets {
		dd, ok := resolved.Datasets[ds.Name]
		if !ok {
			continue
		}
		desc, cols := dd.Apply(ds.Description, ds.ColumnDescriptions())
		descs, err := Descriptions(cols)
		if err != nil {
			return nil, err
		}
		changes = append(changes, DescriptionChange{DatasetID: ds.ID, Description: desc, Columns: descs})
	}
	return changes, nil
}

// FillExample checks e (EINVALID) and gives it its id and time, and returns
// its tables as stored: a JSON array, "[]" when it has none.
func FillExample(e *datachat.Example) (tables string, err error) {
	if err := e.Validate(); err != nil {
		return "", err
	}
	if e.ID == "" {
		e.ID = NewID()
	}
	FillTime(&e.CreatedAt)
	e.Tables = NonNil(e.Tables)
	if tables, err = JSON(e.Tables); err != nil {
		return "", fmt.Errorf("example tables: %w", err)
	}
	return tables, nil
}
