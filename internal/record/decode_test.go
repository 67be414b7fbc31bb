package record

import (
	"database/sql"
	"encoding/json"
	"testing"
	"time"

	"datachat"
)

func TestScanJSON(t *testing.T) {
	for _, src := range []any{`["a","b"]`, []byte(`["a","b"]`)} {
		var got []string
		if err := ScanJSON(&got).(sql.Scanner).Scan(src); err != nil || len(got) != 2 || got[1] != "b" {
			t.Errorf("ScanJSON(%T): got %v, %v, want [a b]", src, got, err)
		}
	}
	kept := []string{"kept"}
	if err := ScanJSON(&kept).(sql.Scanner).Scan(nil); err != nil || len(kept) != 1 {
		t.Errorf("ScanJSON(NULL): got %v, %v, want the value left as it was", kept, err)
	}
	if err := ScanJSON(&kept).(sql.Scanner).Scan(42); err == nil {
		t.Error("ScanJSON(int): got nil error, want one")
	}

	b := []byte(`{"x":1}`)
	var raw json.RawMessage
	if err := ScanRawJSON(&raw).(sql.Scanner).Scan(b); err != nil || string(raw) != `{"x":1}` {
		t.Errorf("ScanRawJSON([]byte): got %s, %v, want {\"x\":1}", raw, err)
	}
	b[2] = 'y'
	if string(raw) != `{"x":1}` {
		t.Errorf("ScanRawJSON kept the driver's buffer: got %s after it changed, want a copy", raw)
	}
	if err := ScanRawJSON(&raw).(sql.Scanner).Scan(nil); err != nil || raw != nil {
		t.Errorf("ScanRawJSON(NULL): got %s, %v, want nil", raw, err)
	}
}

// row is a scanned row: each destination gets its value, through Scan when
// it is a scanner.
type row []any

func (r row) Scan(dest ...any) error {
	for i, d := range dest {
		switch d := d.(type) {
		case sql.Scanner:
			if err := d.Scan(r[i]); err != nil {
				return err
			}
		case *string:
			*d = r[i].(string)
		case *int64:
			*d = r[i].(int64)
		case *time.Time:
			*d = r[i].(time.Time)
		case **time.Time:
			*d = r[i].(*time.Time)
		}
	}
	return nil
}

func TestDecoder(t *testing.T) {
	dc := Decoder{Time: func(p *time.Time) any { return p }, NullTime: func(p **time.Time) any { return p }}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	d, err := dc.Dataset(row{"d1", "c1", "sales", "upload", "csv", "/data/sales.csv",
		`[{"name":"region","type":"VARCHAR"}]`, int64(3), int64(120), at, "Sales by region", `{"region":"Where it was sold"}`})
	if err != nil {
		t.Fatalf("Dataset: %v", err)
	}
	if d.ID != "d1" || d.Name != "sales" || !d.CreatedAt.Equal(at) || len(d.Columns) != 1 {
		t.Errorf("Dataset: got %+v, want d1, sales, %v, one column", d, at)
	}
	if got := d.ColumnDescriptions()["region"]; got != "Where it was sold" {
		t.Errorf("Dataset column description: got %q, want %q", got, "Where it was sold")
	}

	l, err := dc.Lease(row{"owner", "node", (*time.Time)(nil)})
	if err != nil || l != (datachat.Lease{Owner: "owner", Node: "node"}) {
		t.Errorf("Lease without until: got %+v, %v, want a zero Until", l, err)
	}
	l, err = dc.Lease(row{"owner", "node", &at})
	if err != nil || !l.Until.Equal(at) {
		t.Errorf("Lease: got %+v, %v, want Until %v", l, err, at)
	}
}
