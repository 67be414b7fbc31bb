package record

import (
	"testing"
	"time"
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
