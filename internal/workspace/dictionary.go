package workspace

import (
	"strings"

	"github.com/goccy/go-yaml"

	"datachat"
)

// MaxDictionaryBytes caps a dictionary file.
const MaxDictionaryBytes = 1 << 20

// ParseDictionary reads a dictionary file, YAML (or JSON, which YAML reads
// too) in the shape of [datachat.Dictionary]:
//
//	notes: Fiscal year starts in April.
//	datasets:
//	  penguins:
//	    description: One row per penguin.
//	    columns:
//	      bill_length_mm: Bill length in millimetres.
//
// EINVALID, saying where, when it is not valid YAML, has fields of another
// shape, or is empty.
func ParseDictionary(b []byte) (datachat.Dictionary, error) {
	var d datachat.Dictionary
	if len(b) > MaxDictionaryBytes {
		return d, datachat.Errorf(datachat.EINVALID, "The dictionary file is larger than %d bytes.", MaxDictionaryBytes)
	}
	if strings.TrimSpace(string(b)) == "" {
		return d, datachat.Errorf(datachat.EINVALID, "The dictionary file is empty: give notes and datasets (see the README).")
	}
	if err := yaml.UnmarshalWithOptions(b, &d, yaml.DisallowUnknownField()); err != nil {
		// Without colours, with the line it is about.
		msg := yaml.FormatError(err, false, true)
		return datachat.Dictionary{}, datachat.Errorf(datachat.EINVALID,
			"The dictionary file is not in the expected shape (notes: TEXT, datasets: {TABLE: {description: TEXT, columns: {COLUMN: TEXT}}}):\n%s", strings.TrimSpace(msg))
	}
	if d.Notes == nil && len(d.Datasets) == 0 {
		return d, datachat.Errorf(datachat.EINVALID, "The dictionary file gives neither notes nor datasets.")
	}
	return d, nil
}

// DictionaryOf returns the data dictionary of a conversation in the shape
// ParseDictionary reads.
func DictionaryOf(conv *datachat.Conversation, datasets []*datachat.Dataset) datachat.Dictionary {
	notes := conv.Notes
	d := datachat.Dictionary{Notes: &notes, Datasets: map[string]datachat.DatasetDictionary{}}
	for _, ds := range datasets {
		desc := ds.Description
		d.Datasets[ds.Name] = datachat.DatasetDictionary{Description: &desc, Columns: ds.ColumnDescriptions()}
	}
	return d
}
