package dataset

import (
	"context"
	"datachat"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkIngestCSV ingests a generated 200,000-row CSV (about 10 MB).
func BenchmarkIngestCSV(b *testing.B) {
	dir := b.TempDir()
	csv := filepath.Join(dir, "sales.csv")
	var sb strings.Builder
	sb.WriteString("id,category,price,day\n")
	day := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 200000 {
		fmt.Fprintf(&sb, "%d,c%d,%.2f,%s\n", i, (i*7919)%20, float64((i*7)%100000)/100, day.AddDate(0, 0, i%365).Format(time.DateOnly))
	}
	if err := os.WriteFile(csv, []byte(sb.String()), 0o600); err != nil {
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
		sts, err := l.Ingest(context.Background(), f, "sales.csv")
		f.Close()
		if err != nil {
			b.Fatal(err)
		}
		l.RemoveAll(sts)
	}
}

func BenchmarkTableName(b *testing.B) {
	taken := []string{"sales", "sales_2", "customers"}
	for b.Loop() {
		datachat.TableName("Sales.csv.gz", taken)
	}
}
