package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"datachat"
)

// The values that cross between the server and a worker, as both sides
// hold them; package duckdb names them for its callers.

// Table is one dataset a query may read: a name and the path of its Parquet
// file (made absolute).
type Table struct {
	Name string
	Path string
}

// Result is the shape of a query result (datachat.QueryResult), shared by
// POST …/sql, `sql --format json` and tool_call_result. Rows hold JSON-ready
// values: nil, bool, int64, json.Number, string, []any and [Object].
type Result = datachat.QueryResult

// Object is a JSON object that keeps its keys in order: a STRUCT's fields, a
// MAP's entries (keys written as text), a UNION's active member.
type Object []Field

// Field is one key of an [Object].
type Field struct {
	Key   string
	Value any
}

// MarshalJSON writes the fields in order.
func (o Object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(f.Key)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		v, err := json.Marshal(f.Value)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// CellText renders one value as text: strings as they are, numbers and booleans
// as JSON writes them, lists and objects as JSON, and NULL as "".
func CellText(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case json.Number:
		return string(x)
	case bool:
		return strconv.FormatBool(x)
	default:
		b, err := json.Marshal(x)
		if err != nil {
			return fmt.Sprint(x)
		}
		return string(b)
	}
}

// IngestResult describes what an upload became: one table, or several (a
// JSON object's arrays of records).
type IngestResult struct {
	SourceFormat string // what came in: "parquet", "csv", "tsv", "json" or "xlsx"
	Encoding     string // a CSV's text encoding, when it was not UTF-8 (transcoded)
	Tables       []IngestTable
}

// IngestTable is one stored Parquet file of an upload.
type IngestTable struct {
	Suffix   string            // "" for a file's one table; else what part of the file it holds (a JSON key, a sheet)
	Output   string            // its name in the job's Dir
	Columns  []datachat.Column // with friendly types and a few sample values
	RowCount int64
	Notes    []string // what the user should know about how it was read (rows skipped, errors dropped)
}

// SaveColumn is a column of a saved table: its name and the DuckDB type it
// is stored with (one of [SaveTypes]).
type SaveColumn struct {
	Name string
	Type string
}

// SaveJob is a spool of rows to store as Parquet.
type SaveJob struct {
	Dir     string       // the job's directory (absolute): holds Spool, receives the output; nothing else is reachable
	Spool   string       // the spool's name in Dir, written by a duckdb.Spool
	Name    string       // the table's name, for messages
	Columns []SaveColumn // from duckdb.Spool.SaveColumns
}

// FriendlyType maps a DuckDB type as DuckDB spells it (DESCRIBE's column_type,
// e.g. "DECIMAL(25,2)", "VARCHAR[]", "STRUCT(a INTEGER)") to one of the friendly
// type names. Unknown types are "text".
func FriendlyType(sqlType string) string {
	t := strings.ToUpper(strings.TrimSpace(sqlType))
	switch {
	case t == "":
		return datachat.TypeText
	case strings.HasSuffix(t, "]"): // LIST T[] and ARRAY T[n]
		return datachat.TypeList
	case strings.HasPrefix(t, "STRUCT"), strings.HasPrefix(t, "UNION"), strings.HasPrefix(t, "ROW("):
		return datachat.TypeStruct
	case strings.HasPrefix(t, "MAP"):
		return datachat.TypeMap
	case strings.HasPrefix(t, "DECIMAL"), strings.HasPrefix(t, "NUMERIC"):
		return datachat.TypeDecimal
	case strings.HasPrefix(t, "ENUM"):
		return datachat.TypeText
	}
	if i := strings.IndexByte(t, '('); i > 0 { // VARCHAR(10), TIMESTAMP(3)…
		t = strings.TrimSpace(t[:i])
	}
	switch t {
	case "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
		"UINTEGER", "UBIGINT", "UHUGEINT", "INT", "INT1", "INT2", "INT4", "INT8", "INT16",
		"INT32", "INT64", "INT128", "UINT8", "UINT16", "UINT32", "UINT64", "UINT128",
		"SHORT", "LONG", "SIGNED", "BIGNUM", "VARINT":
		return datachat.TypeInteger
	case "FLOAT", "DOUBLE", "REAL", "FLOAT4", "FLOAT8":
		return datachat.TypeFloat
	case "BOOLEAN", "BOOL", "LOGICAL":
		return datachat.TypeBoolean
	case "DATE":
		return datachat.TypeDate
	case "TIME", "TIME_NS", "TIMETZ", "TIME WITH TIME ZONE":
		return datachat.TypeTime
	case "TIMESTAMP", "TIMESTAMP_S", "TIMESTAMP_MS", "TIMESTAMP_NS", "TIMESTAMP_US",
		"TIMESTAMPTZ", "TIMESTAMP WITH TIME ZONE", "DATETIME":
		return datachat.TypeTimestamp
	case "INTERVAL":
		return datachat.TypeInterval
	case "BLOB", "BYTEA", "BINARY", "VARBINARY":
		return datachat.TypeBlob
	case "UUID":
		return datachat.TypeUUID
	}
	return datachat.TypeText
}
