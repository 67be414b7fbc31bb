package datachat

import (
	"regexp"
	"strings"
)

// FileFormat is a kind of file datachat reads: its name for people and the
// file name extensions (lower case, with the dot) it goes by.
type FileFormat struct {
	Name       string   `json:"name"`
	Extensions []string `json:"extensions"`
}

// DatasetFormats are the files a dataset is made from (internal/duckdb's
// ingest tells them apart by content; these are the names they go by). An
// Excel workbook gives one table per sheet, a JSON object one per array of
// records. The web page's drop zones, file picker and error messages are
// built from this list (GET /api/formats), and TableName drops these
// extensions from a file's name.
var DatasetFormats = []FileFormat{
	{Name: "CSV", Extensions: []string{".csv"}},
	{Name: "TSV", Extensions: []string{".tsv"}},
	{Name: "Parquet", Extensions: []string{".parquet", ".pq"}},
	{Name: "Excel", Extensions: []string{".xlsx", ".xlsm"}},
	{Name: "JSON", Extensions: []string{".json"}},
	{Name: "NDJSON", Extensions: []string{".ndjson", ".jsonl"}},
}

// DatasetFormatNames is the formats' names for a sentence: "CSV, TSV,
// Parquet, Excel, JSON or NDJSON".
func DatasetFormatNames() string {
	names := make([]string, len(DatasetFormats))
	for i, f := range DatasetFormats {
		names[i] = f.Name
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// DatasetCompression are the compression suffixes a dataset file may carry
// after its format's extension (data.csv.gz): the ingest unpacks gzip, zstd
// and bzip2.
var DatasetCompression = []string{".gz", ".gzip", ".zst", ".zstd", ".bz2"}

// IsDatasetName reports whether a file name has a dataset format's
// extension, with or without a compression suffix after it.
func IsDatasetName(name string) bool {
	return datasetName.MatchString(strings.ToLower(name))
}

// datasetName matches a dataset's file name; formatSuffix (TableName) is
// the same extensions followed by any compression-like suffix, which a
// table's name leaves out even where the ingest refuses it.
var datasetName, formatSuffix = func() (*regexp.Regexp, *regexp.Regexp) {
	var exts []string
	for _, f := range DatasetFormats {
		for _, e := range f.Extensions {
			exts = append(exts, regexp.QuoteMeta(strings.TrimPrefix(e, ".")))
		}
	}
	var comp []string
	for _, c := range DatasetCompression {
		comp = append(comp, regexp.QuoteMeta(strings.TrimPrefix(c, ".")))
	}
	format := `\.(` + strings.Join(exts, "|") + `)`
	return regexp.MustCompile(format + `(\.(` + strings.Join(comp, "|") + `))?$`),
		regexp.MustCompile(format + `(\.(` + strings.Join(comp, "|") + `|xz|lz4|snappy|br|z|zip))*$`)
}()
