package record

import (
	"errors"
	"testing"
	"time"

	"datachat"
)

func TestFill(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6789, time.FixedZone("X", 3600))
	stored := time.Date(2026, 1, 2, 2, 4, 5, 6000, time.UTC)

	id, created, updated := "", at, time.Time{}
	Fill(&id, &created, &updated)
	if id == "" {
		t.Error("got no id, want a new one")
	}
	if !created.Equal(stored) || created.Location() != time.UTC {
		t.Errorf("created: got %v, want %v", created, stored)
	}
	if updated != created {
		t.Errorf("updated: got %v, want created (%v)", updated, created)
	}

	id, created, updated = "kept", time.Time{}, at
	before := Now()
	Fill(&id, &created, &updated)
	if id != "kept" {
		t.Errorf("id: got %q, want kept", id)
	}
	if created.Before(before) || created.Nanosecond()%1000 != 0 {
		t.Errorf("created: got %v, want now (after %v) to the microsecond", created, before)
	}
	if updated != stored {
		t.Errorf("updated: got %v, want %v", updated, stored)
	}
}

func TestTimePtr(t *testing.T) {
	if got := TimePtr(nil); got != nil {
		t.Errorf("got %v, want nil", got)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 6789, time.UTC)
	if got := TimePtr(&at); got == nil || *got != Time(at) {
		t.Errorf("got %v, want %v", got, Time(at))
	}
}

func TestWriteError(t *testing.T) {
	broken := errors.New("constraint failed")
	tests := []struct {
		name     string
		err      error
		v        Violation
		notFound string
		conflict string
		code     string
		msg      string
	}{
		{"nil", nil, NoViolation, "parent not found", "row exists", "", ""},
		{"foreign key", broken, ForeignKeyViolation, "parent not found", "row exists", datachat.ENOTFOUND, "parent not found"},
		{"unique", broken, UniqueViolation, "parent not found", "row exists", datachat.ECONFLICT, "row exists"},
		{"foreign key not expected", broken, ForeignKeyViolation, "", "row exists", datachat.EINTERNAL, "insert row: constraint failed"},
		{"unique not expected", broken, UniqueViolation, "parent not found", "", datachat.EINTERNAL, "insert row: constraint failed"},
		{"other", broken, NoViolation, "parent not found", "row exists", datachat.EINTERNAL, "insert row: constraint failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := WriteError(tt.err, tt.v, "insert row", tt.notFound, tt.conflict)
			if tt.err == nil {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			if code := datachat.ErrorCode(err); code != tt.code {
				t.Errorf("code: got %s, want %s", code, tt.code)
			}
			if tt.code == datachat.EINTERNAL {
				if err.Error() != tt.msg || !errors.Is(err, broken) {
					t.Errorf("got %q, want %q wrapping the write's error", err, tt.msg)
				}
			} else if got := datachat.ErrorMessage(err); got != tt.msg {
				t.Errorf("message: got %q, want %q", got, tt.msg)
			}
		})
	}
}

func TestWrap(t *testing.T) {
	if err := Wrap("update", nil); err != nil {
		t.Errorf("Wrap(nil): got %v, want nil", err)
	}
	coded := datachat.Errorf(datachat.ENOTFOUND, "conversation not found")
	if err := Wrap("update", coded); err != error(coded) {
		t.Errorf("Wrap(ENOTFOUND): got %v, want it as it is", err)
	}
	plain := errors.New("disk I/O error")
	if err := Wrap("update", plain); err.Error() != "update: disk I/O error" || !errors.Is(err, plain) {
		t.Errorf("Wrap(plain): got %v, want it wrapped with the operation", err)
	}
}
