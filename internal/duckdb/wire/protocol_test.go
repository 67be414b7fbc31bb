package wire

import (
	"reflect"
	"testing"
	"time"

	"datachat"
)

// TestRoundTrip: every request and answer reads back as it was written,
// after the request frame's op and number.
func TestRoundTrip(t *testing.T) {
	limits := Limits{Data: 3 << 30, CPU: time.Hour, QueryCPU: 32 * time.Second, Landlock: true}
	cols := []datachat.Column{{Name: "a", SQLType: "DECIMAL(25,2)", Type: datachat.TypeDecimal, Samples: []string{"1.50"}}, {Name: "b", SQLType: "VARCHAR", Type: datachat.TypeText}}
	check := func(name string, op byte, body []byte, read func(*Dec), got, want any) {
		t.Helper()
		gotOp, seq, d := ReadRequest(Request(op, 7, body))
		read(d)
		if gotOp != op || seq != 7 || d.Err() != nil || len(d.b) != 0 {
			t.Errorf("%s: op %d, number %d, error %v, %d bytes left; want op %d, number 7, all read", name, gotOp, seq, d.Err(), len(d.b), op)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %+v, want %+v", name, got, want)
		}
	}

	open := &Open{Root: "/tmp/sql-1", Tables: []Table{{Name: "t", Path: "/data/t.parquet"}}, MemoryLimit: 1 << 30, Threads: 2, MaxTempBytes: 4 << 30, Timeout: 30 * time.Second, Denied: []string{"getenv"}, Limits: limits}
	var gotOpen Open
	check("open", OpOpen, open.Encode(), gotOpen.Decode, &gotOpen, open)
	// Denied nil (read them from the catalog) and empty (deny nothing
	// more) differ.
	for _, denied := range [][]string{nil, {}} {
		o := &Open{Root: "/r", Denied: denied, Tables: []Table{}}
		var got Open
		check("open, denied", OpOpen, o.Encode(), got.Decode, &got, o)
	}

	q := &Query{SQL: "SELECT 1", Limits: ResultLimits{MaxRows: -1, MaxCell: 1 << 20, MaxBytes: 64 << 20}}
	var gotQuery Query
	check("query", OpQuery, q.Encode(), gotQuery.Decode, &gotQuery, q)

	in := &Ingest{Dir: "/j", Input: "dc-input", Name: "sales.csv", MaxBytes: 8 << 30, MaxLine: 2 << 20, MemoryLimit: 1 << 30, Threads: 4, Limits: limits, Every: 250 * time.Millisecond}
	var gotIngest Ingest
	check("ingest", OpIngest, in.Encode(), gotIngest.Decode, &gotIngest, in)

	s := &Save{Job: SaveJob{Dir: "/j", Spool: "dc-spool", Name: "t", Columns: []SaveColumn{{Name: "a", Type: "BIGINT"}}}, MemoryLimit: 1 << 30, Threads: 1, Limits: limits}
	var gotSave Save
	check("save", OpSave, s.Encode(), gotSave.Decode, &gotSave, s)

	// Answers, as a worker writes them after ReplyOK.
	answer := func(name string, write func(*Enc), read func(*Dec), got, want any) {
		t.Helper()
		e := &Enc{}
		e.Byte(ReplyOK)
		write(e)
		d, err := DecodeReply(e.Bytes())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		read(d)
		if d.Err() != nil || len(d.b) != 0 {
			t.Errorf("%s: error %v, %d bytes left", name, d.Err(), len(d.b))
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %+v, want %+v", name, got, want)
		}
	}
	oa := &OpenAnswer{Limits: []string{"memory: RLIMIT_DATA 2 GiB"}, Denied: []string{"getenv", "write_log"}}
	var gotOA OpenAnswer
	answer("open answer", oa.Encode, gotOA.Decode, &gotOA, oa)
	ir := &IngestResult{SourceFormat: "csv", Encoding: "Windows-1252", Tables: []IngestTable{{Suffix: "", Output: "dc-output.parquet", Columns: cols, RowCount: 3, Notes: []string{"note"}}}}
	var gotIR IngestResult
	answer("ingest result", ir.Encode, gotIR.Decode, &gotIR, ir)
	saved := &IngestTable{Output: "dc-output.parquet", Columns: cols, RowCount: 9}
	var gotSaved IngestTable
	answer("saved table", saved.EncodeSaved, gotSaved.DecodeSaved, &gotSaved, saved)

	// A progress frame is a reply of its own kind, read after its status.
	p := &Progress{Phase: PhaseConverting, Size: 100, Bytes: 40, Percent: 40}
	f := p.Frame()
	if f[0] != ReplyProgress {
		t.Fatalf("progress frame starts with %d, want ReplyProgress", f[0])
	}
	var gotP Progress
	d := NewDec(f[1:])
	gotP.Decode(d)
	if d.Err() != nil || gotP != *p {
		t.Errorf("progress: got %+v (%v), want %+v", gotP, d.Err(), *p)
	}

	// A cancel names the request it means.
	if op, seq, _ := ReadRequest(Cancel(42)); op != OpCancel || seq != 42 {
		t.Errorf("cancel: op %d, number %d; want OpCancel, 42", op, seq)
	}
}
