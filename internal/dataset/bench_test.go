package dataset

import (
	"context"
	"datachat"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkIngestCSV ingests a generated 200,000-row CSV (about 10 MB).
func BenchmarkIngestCSV(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("id,category,price,day\n")
	day := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 200000 {
		fmt.Fprintf(&sb, "%d,c%d,%.2f,%s\n", i, (i*7919)%20, float64((i*7)%100000)/100, day.AddDate(0, 0, i%365).Format(time.DateOnly))
	}
	benchIngest(b, "sales.csv", sb.String(), nil)
}

func BenchmarkTableName(b *testing.B) {
	taken := []string{"sales", "sales_2", "customers"}
	for b.Loop() {
		datachat.TableName("Sales.csv.gz", taken)
	}
}

// BenchmarkIngestEuropeanCSV ingests the rows of BenchmarkIngestCSV written
// the European way: ";" between fields, a decimal comma and "." between
// thousands in the price (read as numbers), dates as 31.12.2024.
func BenchmarkIngestEuropeanCSV(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("id;kategorie;preis;tag\n")
	day := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 200000 {
		cents := (i * 7919) % 10000000
		fmt.Fprintf(&sb, "%d;c%d;%s,%02d;%s\n", i, (i*7919)%20, thousands(cents/100), cents%100, day.AddDate(0, 0, i%365).Format("02.01.2006"))
	}
	benchIngest(b, "umsatz.csv", sb.String(), func(sts []*Stored) {
		if sts[0].Columns[2].Type != datachat.TypeFloat {
			b.Fatalf("preis read as %s", sts[0].Columns[2].Type)
		}
	})
}

// benchIngest writes text to a file called name and ingests it once per
// iteration, removing what each made; check, if not nil, sees each result.
func benchIngest(b *testing.B, name, text string, check func([]*Stored)) {
	dir := b.TempDir()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(text)))
	l := mustLoader(b, Options{Dir: filepath.Join(dir, "datasets")})
	defer workerCPU(b)()
	for b.Loop() {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		sts, err := l.Ingest(context.Background(), f, name)
		f.Close()
		if err != nil {
			b.Fatal(err)
		}
		if check != nil {
			check(sts)
		}
		l.RemoveAll(sts)
	}
}

// thousands writes n with "." between thousands.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "." + s[i:]
	}
	return s
}

// workerCPU reports the CPU time the ingest workers (child processes) spent
// per operation, which other load on the machine does not inflate as it
// does the wall time: call the function it returns when the loop is done.
func workerCPU(b *testing.B) func() {
	cpu := func() time.Duration {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := cpu()
	return func() {
		b.ReportMetric(float64((cpu()-start).Milliseconds())/float64(b.N), "worker-cpu-ms/op")
	}
}
