package dataset

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkIngestCSV ingests a generated 200,000-row CSV (about 10 MB).
func BenchmarkIngestCSV(b *testing.B) {
	dir := b.TempDir()
	csv := filepath.Join(dir, "sales.csv")
	db, err := sql.Open("duckdb", "")
	if err != nil {
		b.Fatal(err)
	}
	_, err = db.Exec(fmt.Sprintf(`COPY (SELECT range AS id, 'c' || (hash(range) %% 20)::VARCHAR AS category,
		(hash(range * 7) %% 100000) / 100.0 AS price, DATE '2024-01-01' + (range %% 365)::INTEGER AS day
		FROM range(200000)) TO %s (FORMAT csv, HEADER)`, lit(csv)))
	db.Close()
	if err != nil {
		b.Fatal(err)
	}
	fi, _ := os.Stat(csv)
	b.SetBytes(fi.Size())
	l := mustLoader(b, Options{Dir: filepath.Join(dir, "datasets")})
	for b.Loop() {
		f, err := os.Open(csv)
		if err != nil {
			b.Fatal(err)
		}
		st, err := l.Ingest(context.Background(), f, "sales.csv")
		f.Close()
		if err != nil {
			b.Fatal(err)
		}
		l.Remove(st.Path)
	}
}

func BenchmarkTableName(b *testing.B) {
	taken := []string{"sales", "sales_2", "customers"}
	for b.Loop() {
		TableName("Sales.csv.gz", taken)
	}
}
