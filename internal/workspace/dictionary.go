package workspace

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/goccy/go-yaml"

	"datachat"
	"datachat/internal/yamlsafe"
)

// MaxDictionaryBytes caps a dictionary file.
const MaxDictionaryBytes = 1 << 20

// ParseDictionary reads a dictionary file, YAML or JSON, in the shape of
// [datachat.Dictionary]:
//
//	notes: Fiscal year starts in April.
//	datasets:
//	  penguins:
//	    description: One row per penguin.
//	    columns:
//	      bill_length_mm: Bill length in millimetres.
//
// Any signed-in user can send one, so it is read under internal/yamlsafe's
// limits (size, values, nesting, aliases and merge keys, time). EINVALID,
// saying where and what to do, when it passes a limit, is not UTF-8 (naming
// the field), is not valid YAML, has fields of another shape, or is empty.
func ParseDictionary(ctx context.Context, b []byte) (datachat.Dictionary, error) {
	var d datachat.Dictionary
	if strings.TrimSpace(string(b)) == "" {
		return d, datachat.Errorf(datachat.EINVALID, "The dictionary file is empty: give notes and datasets (see the README).")
	}
	err := yamlsafe.Unmarshal(ctx, b, &d, yamlsafe.Options{What: "the dictionary file", Strict: true, MaxBytes: MaxDictionaryBytes})
	var ye *yamlsafe.Error
	switch {
	case err == nil:
	case errors.As(err, &ye) && ye.Kind == yamlsafe.InvalidUTF8 && len(ye.Path) > 0:
		return datachat.Dictionary{}, datachat.Errorf(datachat.EINVALID,
			"The dictionary file is refused: %s not valid UTF-8 (line %d); save the file as UTF-8.", dictionaryField(ye.Path, ye.Key), ye.Line)
	case errors.As(err, &ye) && (ye.Kind == yamlsafe.Shape || ye.Kind == yamlsafe.UnknownField || ye.Kind == yamlsafe.Syntax):
		return datachat.Dictionary{}, datachat.Errorf(datachat.EINVALID,
			"%s (the shape is notes: TEXT, datasets: {TABLE: {description: TEXT, columns: {COLUMN: TEXT}, metrics: {NAME: {sql: EXPRESSION, filter: CONDITION, description: TEXT}}, synonyms: {TERM: MEANING}, relationships: [{columns: [COLUMN], ref_table: TABLE, ref_columns: [COLUMN]}]}}, sources: {DATABASE: {SCHEMA.TABLE: the same as a dataset's}}).", upperFirst(err.Error()))
	case errors.As(err, &ye) && ye.Kind == yamlsafe.TooSlow && ctx.Err() != nil:
		return datachat.Dictionary{}, ctx.Err()
	default:
		return datachat.Dictionary{}, datachat.Errorf(datachat.EINVALID, "%s.", upperFirst(err.Error()))
	}
	if d.Notes == nil && len(d.Datasets) == 0 && len(d.Sources) == 0 {
		return d, datachat.Errorf(datachat.EINVALID, "The dictionary file gives neither notes, nor datasets, nor sources.")
	}
	return d, nil
}

// dictionaryField names the field of a dictionary file at path, with its
// verb: "the notes are", "the description of orders.price is".
func dictionaryField(path []string, key bool) string {
	switch {
	case len(path) == 1 && path[0] == "notes" && !key:
		return "the notes are"
	case len(path) == 2 && path[0] == "datasets" && key:
		return "a table name is"
	case len(path) == 3 && path[0] == "datasets" && path[2] == "description" && !key:
		return "the description of " + path[1] + " is"
	case len(path) == 4 && path[0] == "datasets" && path[2] == "columns" && key:
		return "a column name of " + path[1] + " is"
	case len(path) == 4 && path[0] == "datasets" && path[2] == "columns":
		return "the description of " + path[1] + "." + path[3] + " is"
	case key:
		return "a key in " + strings.Join(path[:len(path)-1], ".") + " is"
	}
	return strings.Join(path, ".") + " is"
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// DictionaryOf returns the data dictionary of a conversation in the shape
// ParseDictionary reads: its notes, its datasets' descriptions and semantic
// layer, and its sources' tables' (layer may be nil).
func DictionaryOf(conv *datachat.Conversation, datasets []*datachat.Dataset, layer *datachat.SemanticLayer) datachat.Dictionary {
	notes := conv.Notes
	d := datachat.Dictionary{Notes: &notes, Datasets: map[string]datachat.DatasetDictionary{}}
	for _, ds := range datasets {
		desc := ds.Description
		dd := datachat.DatasetDictionary{Description: &desc, Columns: ds.ColumnDescriptions()}
		if layer != nil {
			semantics(&dd, layer.Datasets[ds.ID])
		}
		d.Datasets[ds.Name] = dd
	}
	if layer != nil && len(layer.Sources) > 0 {
		d.Sources = map[string]map[string]datachat.DatasetDictionary{}
		for src, tables := range layer.Sources {
			d.Sources[src] = map[string]datachat.DatasetDictionary{}
			for name, sem := range tables {
				dd := datachat.DatasetDictionary{Columns: sem.Columns}
				if sem.Description != "" {
					desc := sem.Description
					dd.Description = &desc
				}
				semantics(&dd, sem)
				d.Sources[src][name] = dd
			}
		}
	}
	return d
}

// semantics puts a table's metrics, synonyms and relationships in dd.
func semantics(dd *datachat.DatasetDictionary, s datachat.TableSemantics) {
	dd.Metrics, dd.Synonyms = s.Metrics, s.Synonyms
	if len(s.Relationships) > 0 {
		rels := s.Relationships
		dd.Relationships = &rels
	}
}

// DictionaryYAML writes a dictionary as YAML, as ParseDictionary reads it
// back: multi-line texts as literal blocks. A key that spans lines (a
// column's name from a CSV header can) is one goccy/go-yaml writes as a
// block, which no reader takes for a key: such a dictionary is written as
// JSON, which is YAML too.
func DictionaryYAML(d datachat.Dictionary) ([]byte, error) {
	if multilineKey(d) {
		b, err := json.MarshalIndent(d, "", "  ")
		return append(b, '\n'), err
	}
	return yaml.MarshalWithOptions(d, yaml.UseLiteralStyleIfMultiline(true))
}

func multilineKey(d datachat.Dictionary) bool {
	has := func(m map[string]string) bool {
		for k := range m {
			if strings.ContainsAny(k, "\r\n") {
				return true
			}
		}
		return false
	}
	tables := func(m map[string]datachat.DatasetDictionary) bool {
		for k, dd := range m {
			if strings.ContainsAny(k, "\r\n") || has(dd.Columns) || has(dd.Synonyms) {
				return true
			}
			for name := range dd.Metrics {
				if strings.ContainsAny(name, "\r\n") {
					return true
				}
			}
		}
		return false
	}
	if tables(d.Datasets) {
		return true
	}
	for k, t := range d.Sources {
		if strings.ContainsAny(k, "\r\n") || tables(t) {
			return true
		}
	}
	return false
}
