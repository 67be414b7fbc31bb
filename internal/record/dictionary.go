package record

import (
	"encoding/json"
	"fmt"
	"slices"

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
	changes, _, err := Changes(d, datasets)
	return changes, err
}

// ChangesLayer reports whether d changes the semantic layer: a dataset's
// metrics, synonyms or relationships, or anything of a source's tables.
func ChangesLayer(d datachat.Dictionary) bool {
	if len(d.Sources) > 0 {
		return true
	}
	for _, dd := range d.Datasets {
		if len(dd.Metrics) > 0 || len(dd.Synonyms) > 0 || dd.Relationships != nil {
			return true
		}
	}
	return false
}

// Layer decodes a stored semantic layer ("" for none).
func Layer(text string) (*datachat.SemanticLayer, error) {
	l := &datachat.SemanticLayer{}
	if text == "" {
		return l, nil
	}
	if err := json.Unmarshal([]byte(text), l); err != nil {
		return nil, fmt.Errorf("semantic layer: %w", err)
	}
	return l, nil
}

// ApplyLayer returns the stored semantic layer text with d's changes (d as
// [Changes] resolved it; its sources as the caller resolved them,
// [datachat.Dictionary.ResolveSources]), keeping only the datasets that
// exist.
func ApplyLayer(stored string, d datachat.Dictionary, datasets []*datachat.Dataset) (string, error) {
	l, err := Layer(stored)
	if err != nil {
		return "", err
	}
	live := map[string]bool{}
	for _, ds := range datasets {
		live[ds.ID] = true
		if dd, ok := d.Datasets[ds.Name]; ok {
			if l.Datasets == nil {
				l.Datasets = map[string]datachat.TableSemantics{}
			}
			l.Datasets[ds.ID] = l.Datasets[ds.ID].Apply(dd, false)
		}
	}
	for id, sem := range l.Datasets {
		if !live[id] || sem.Empty() {
			delete(l.Datasets, id)
		}
	}
	for src, tables := range d.Sources {
		if l.Sources == nil {
			l.Sources = map[string]map[string]datachat.TableSemantics{}
		}
		if l.Sources[src] == nil {
			l.Sources[src] = map[string]datachat.TableSemantics{}
		}
		for name, dd := range tables {
			if sem := l.Sources[src][name].Apply(dd, true); sem.Empty() {
				delete(l.Sources[src], name)
			} else {
				l.Sources[src][name] = sem
			}
		}
		if len(l.Sources[src]) == 0 {
			delete(l.Sources, src)
		}
	}
	return JSON(l)
}

// Changes checks d against a conversation's datasets and returns the
// descriptions to store, and d resolved; EINVALID as
// [datachat.Dictionary.Resolve].
func Changes(d datachat.Dictionary, datasets []*datachat.Dataset) ([]DescriptionChange, datachat.Dictionary, error) {
	resolved, err := d.Resolve(datasets)
	if err != nil {
		return nil, resolved, err
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
			return nil, resolved, err
		}
		changes = append(changes, DescriptionChange{DatasetID: ds.ID, Description: desc, Columns: descs})
	}
	return changes, resolved, nil
}

// FillExample checks e (EINVALID) and gives it its id and time, and returns
// its tables as stored: a JSON array, "[]" when it has none.
func FillExample(e *datachat.Example) (tables string, err error) {
	if err := e.Validate(); err != nil {
		return "", err
	}
	FillCreated(&e.ID, &e.CreatedAt)
	e.Tables = NonNil(e.Tables)
	if tables, err = JSON(e.Tables); err != nil {
		return "", fmt.Errorf("example tables: %w", err)
	}
	return tables, nil
}

// CopyLayer returns the stored semantic layer text for a copy of its
// conversation: the semantics of the datasets copied, under their copies'
// ids (datasets maps an original's id to its copy), and those of the
// database sources copied; "" when nothing is left.
func CopyLayer(stored string, datasets map[string]*datachat.Dataset, sources []string) (string, error) {
	l, err := Layer(stored)
	if err != nil {
		return "", err
	}
	out := &datachat.SemanticLayer{}
	for id, sem := range l.Datasets {
		if d, ok := datasets[id]; ok && !sem.Empty() {
			if out.Datasets == nil {
				out.Datasets = map[string]datachat.TableSemantics{}
			}
			out.Datasets[d.ID] = sem
		}
	}
	for src, tables := range l.Sources {
		if slices.Contains(sources, src) && len(tables) > 0 {
			if out.Sources == nil {
				out.Sources = map[string]map[string]datachat.TableSemantics{}
			}
			out.Sources[src] = tables
		}
	}
	if out.Datasets == nil && out.Sources == nil {
		return "", nil
	}
	b, err := json.Marshal(out)
	if err != nil {
		return "", fmt.Errorf("semantic layer: %w", err)
	}
	return string(b), nil
}
