package wire

import (
	"encoding/json"
	"errors"
	"testing"

	"datachat"
)

// FuzzDecodeReply feeds arbitrary frames to the server's reader of what a
// worker sends: a worker is a process that ran hostile SQL, so its answers
// are read as untrusted (no panic, no allocation beyond the frame, no code
// a worker may not claim).
func FuzzDecodeReply(f *testing.F) {
	e := &Enc{}
	e.Byte(ReplyOK)
	e.Result(&Result{Columns: []datachat.Column{{Name: "a", SQLType: "VARCHAR"}}, Rows: [][]any{{"x"}, {nil}}})
	f.Add(e.Bytes())
	e = &Enc{}
	e.Byte(ReplyOK)
	e.Result(&Result{Columns: []datachat.Column{{Name: "o", SQLType: "STRUCT(a INTEGER[])"}}, Rows: [][]any{{Object{{Key: "a", Value: []any{int64(1), json.Number("1.5"), true}}}}}})
	f.Add(e.Bytes())
	e = &Enc{}
	EncodeError(e, &datachat.QueryError{Kind: datachat.KindSyntax, Message: "x"}, false)
	f.Add(e.Bytes())
	e = &Enc{}
	EncodeError(e, datachat.Errorf(datachat.EUNAUTHORIZED, "claimed"), false)
	f.Add(e.Bytes())
	e = &Enc{}
	EncodeError(e, datachat.NoSpace(nil), false)
	f.Add(e.Bytes())
	f.Add([]byte{ReplyOK, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := DecodeReply(b)
		if err != nil {
			// A full disk is the one condition of the server a worker may
			// report (replyNoSpace: no payload, a message of the server's).
			if code := datachat.ErrorCode(err); code != datachat.EINVALID && code != datachat.EINTERNAL && !errors.Is(err, datachat.ErrNoSpace) {
				t.Fatalf("a worker claimed code %q", code)
			}
			return
		}
		r := d.Result()
		if d.Err() == nil {
			for _, row := range r.Rows {
				if len(row) != len(r.Columns) {
					t.Fatalf("row of %d values for %d columns", len(row), len(r.Columns))
				}
			}
		}
	})
}
