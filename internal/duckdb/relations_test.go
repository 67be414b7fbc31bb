package duckdb

import (
	"context"
	"slices"
	"testing"

	"datachat"
)

func TestRelations(t *testing.T) {
	e := mustEngine(t, Options{})
	dir := t.TempDir()
	tables := []Table{
		{Name: "penguins", Path: mustParquet(t, dir, "p.parquet", "SELECT 'Adelie' AS species, 3750 AS body_mass_g")},
		{Name: "islands", Path: mustParquet(t, dir, "i.parquet", "SELECT 'Adelie' AS species, 'Torgersen' AS island")},
		{Name: "Weird Name", Path: mustParquet(t, dir, "w.parquet", "SELECT 1 AS x")},
	}
	for _, tc := range []struct {
		sql  string
		want []string
	}{
		{"SELECT count(*) FROM penguins", []string{"penguins"}},
		{"SELECT * FROM islands JOIN PENGUINS USING (species)", []string{"penguins", "islands"}},
		{`SELECT x FROM "Weird Name"`, []string{"Weird Name"}},
		{"SELECT 'penguins' AS islands -- FROM islands", nil},
		{"WITH islands AS (SELECT 1) SELECT * FROM islands", nil},
		{"WITH penguins AS (SELECT * FROM penguins WHERE body_mass_g > 3000) SELECT count(*) FROM penguins", []string{"penguins"}},
		{"WITH a AS (SELECT 1 AS x), islands AS (SELECT * FROM a) SELECT * FROM islands", nil},
		{"WITH RECURSIVE islands(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM islands WHERE n < 3) SELECT * FROM islands", nil},
		{"SELECT (WITH islands AS (SELECT 2) SELECT * FROM islands), * FROM islands", []string{"islands"}},
		{"SELECT * FROM penguins WHERE species IN (SELECT species FROM main.islands)", []string{"penguins", "islands"}},
		{"SELECT 1 FROM range(3)", nil},
	} {
		got, err := e.Relations(context.Background(), "c", tables, tc.sql)
		if err != nil {
			t.Errorf("Relations(%q): %v", tc.sql, err)
			continue
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("Relations(%q): got %q, want %q", tc.sql, got, tc.want)
		}
	}
	for _, bad := range []string{"SELEC 1", "DROP TABLE penguins"} {
		_, err := e.Relations(context.Background(), "c", tables, bad)
		if datachat.ErrorCode(err) != datachat.EINVALID {
			t.Errorf("Relations(%q): got %v, want an EINVALID error", bad, err)
		}
	}
}
