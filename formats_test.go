package datachat

import (
	"strings"
	"testing"
)

func TestDatasetNames(t *testing.T) {
	for name, want := range map[string]bool{
		"sales.csv": true, "Budget 2026.XLSX": true, "macros.xlsm": true, "x.parquet": true, "x.pq": true,
		"events.jsonl": true, "log.ndjson.gz": true, "data.csv.zst": true, "a.json.bz2": true,
		"report.pdf": false, "notes.md": false, "x.csv.xz": false, "archive.zip": false, "csv": false,
	} {
		if got := IsDatasetName(name); got != want {
			t.Errorf("IsDatasetName(%q) = %v, want %v", name, got, want)
		}
	}
	// TableName drops every listed extension, compressed or not.
	for name, want := range map[string]string{"Budget.xlsm": "budget", "x.pq": "x", "log.ndjson.gz": "log", "a.csv.xz": "a"} {
		if got := TableName(name, nil); got != want {
			t.Errorf("TableName(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestSearchSnippet(t *testing.T) {
	long := strings.Repeat("lead words ", 30) + "the OTTERS ate fish " + strings.Repeat("tail words ", 30)
	got := SearchSnippet(long, SearchTerm(" otters "), 60)
	if !strings.Contains(got, "OTTERS") || !strings.HasPrefix(got, "…") || !strings.HasSuffix(got, "…") || len([]rune(got)) > 64 {
		t.Errorf("snippet %q: want the match, cut at both ends, about 60 characters", got)
	}
	if got := SearchSnippet("short\ntext here", "text", 60); got != "short text here" {
		t.Errorf("short text: %q", got)
	}
	if got := SearchSnippet("anything", "", 60); got != "" {
		t.Errorf("empty term: %q", got)
	}
}

func TestDatasetFormatNames(t *testing.T) {
	if got, want := DatasetFormatNames(), "CSV, TSV, Parquet, Excel, JSON or NDJSON"; got != want {
		t.Errorf("DatasetFormatNames() = %q, want %q", got, want)
	}
}
