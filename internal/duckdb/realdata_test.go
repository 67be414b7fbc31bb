package duckdb

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"datachat"
	"datachat/internal/sharedtest"
)

// TestDecompressionBomb: two 1 GiB strings in a 4 KB file must end inside the
// memory limit, and the instance must keep serving.
func TestDecompressionBomb(t *testing.T) {
	e := mustEngine(t, Options{MemoryLimit: 256 << 20})
	tables := []Table{{Name: "bomb", Path: sharedtest.Path(t, "data/parquet/large_string_map.brotli.parquet")}}
	ctx := context.Background()
	res, err := e.Query(ctx, "c", tables, "SELECT count(*) FROM bomb")
	if err != nil || res.Rows[0][0] != int64(2) {
		t.Fatalf("count: %v %v", res, err)
	}
	for _, q := range []string{"SELECT * FROM bomb", "SELECT length(map_keys(arr)[1]) FROM bomb"} {
		_, err = e.Query(ctx, "c", tables, q)
		var qe *datachat.QueryError
		if !errors.As(err, &qe) || qe.Kind != datachat.KindMemory {
			t.Errorf("%s: got %v, want a memory-limit error", q, err)
		}
		t.Logf("%s: %v", q, err)
	}
	if _, err := e.Query(ctx, "c", tables, "SELECT count(*) FROM bomb"); err != nil {
		t.Errorf("after the bomb: %v", err)
	}
}

func TestParquetTestdata(t *testing.T) {
	e := mustEngine(t, Options{MemoryLimit: 256 << 20})
	ctx := context.Background()
	query := func(file, q string) (*Result, error) {
		return e.Query(ctx, "", []Table{{Name: "t", Path: sharedtest.Path(t, "data/parquet/"+file)}}, q)
	}
	// int96_from_spark read in place (as the engine's tests do): rows 1–5 as
	// Spark wrote them; row 6 (year 290000) DuckDB converts silently to a
	// wrong value. An upload stores it as NULL, with a note (the ingest test
	// in internal/dataset).
	res, err := query("int96_from_spark.parquet", "SELECT * FROM t")
	if err != nil {
		t.Fatal(err)
	}
	want := []any{"2024-01-01T20:34:56.123456", "2024-01-01T01:00:00", "9999-12-31T03:00:00", "2024-12-30T23:00:00", nil}
	for i, w := range want {
		if res.Rows[i][0] != w {
			t.Errorf("int96 row %d: got %v, want %v", i+1, res.Rows[i][0], w)
		}
	}
	t.Logf("int96 row 6 (Spark wrote year 290000): %v", res.Rows[5][0])

	res, err = query("fixed_length_decimal.parquet", "SELECT * FROM t")
	if err != nil || res.RowCount != 24 || res.Columns[0].SQLType != "DECIMAL(25,2)" || res.Rows[0][0] != "1.00" {
		t.Errorf("fixed_length_decimal: %v %v", res, err)
	}
	res, err = query("nested_maps.snappy.parquet", "SELECT * FROM t")
	if err != nil || res.RowCount != 6 || res.Columns[0].Type != "map" {
		t.Fatalf("nested_maps: %v %v", res, err)
	}
	b, _ := json.Marshal(res.Rows[0])
	if string(b) != `[{"a":{"1":true,"2":false}},1,1]` {
		t.Errorf("nested_maps row 1: %s", b)
	}
	res, err = query("nested_lists.snappy.parquet", "SELECT * FROM t")
	if err != nil || res.RowCount != 3 || res.Columns[0].SQLType != "VARCHAR[][][]" {
		t.Fatalf("nested_lists: %v %v", res, err)
	}
	res, err = query("nested_structs.rust.parquet", "SELECT * FROM t")
	if err != nil || res.RowCount != 1 || res.Columns[0].Type != "struct" {
		t.Fatalf("nested_structs: %v %v", res, err)
	}
	_, err = query("hadoop_lz4_compressed.parquet", "SELECT * FROM t")
	if datachat.ErrorCode(err) != datachat.EINVALID || !strings.Contains(err.Error(), "LZ4") {
		t.Errorf("hadoop_lz4: got %v, want an error naming the codec", err)
	}
}

// TestSharedParquet queries every Parquet file of ../shared/data through the
// engine: each returns its rows or fails with a clear error, never a crash.
func TestSharedParquet(t *testing.T) {
	dir := sharedtest.Path(t, "data/parquet")
	files, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	e := mustEngine(t, Options{MemoryLimit: 256 << 20})
	rows := map[string]int{
		"alltypes_plain.parquet": 8, "alltypes_dictionary.parquet": 2, "alltypes_plain.snappy.parquet": 2,
		"nested_structs.rust.parquet": 1, "nested_maps.snappy.parquet": 6, "nested_lists.snappy.parquet": 3,
		"nulls.snappy.parquet": 8, "int96_from_spark.parquet": 6, "fixed_length_decimal.parquet": 24,
		"byte_array_decimal.parquet": 24, "binary.parquet": 12, "byte_stream_split.zstd.parquet": 300,
		"concatenated_gzip_members.parquet": 513, "delta_length_byte_array.parquet": 1000,
		"datapage_v2.snappy.parquet": 5, "userdata1.parquet": 1000, "datapage_v1-corrupt-checksum.parquet": 1000,
	}
	failing := map[string]string{
		"large_string_map.brotli.parquet": datachat.KindMemory,
		"hadoop_lz4_compressed.parquet":   datachat.KindOther,
		"PARQUET-1481.parquet":            "open",
	}
	for _, f := range files {
		t.Run(f.Name(), func(t *testing.T) {
			res, err := e.Query(context.Background(), "", []Table{{Name: "t", Path: filepath.Join(dir, f.Name())}}, "SELECT * FROM t")
			if want, ok := failing[f.Name()]; ok {
				if err == nil {
					t.Fatalf("got %d rows, want an error", res.RowCount)
				}
				var qe *datachat.QueryError
				if want != "open" && (!errors.As(err, &qe) || qe.Kind != want) {
					t.Errorf("got %v, want kind %q", err, want)
				}
				if datachat.ErrorCode(err) != datachat.EINVALID {
					t.Errorf("got code %q, want EINVALID", datachat.ErrorCode(err))
				}
				t.Logf("%v", firstLine(err.Error()))
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want, ok := rows[f.Name()]; ok && res.RowCount != want {
				t.Errorf("got %d rows, want %d", res.RowCount, want)
			}
			if _, err := json.Marshal(res); err != nil {
				t.Errorf("marshal: %v", err)
			}
		})
	}
}
