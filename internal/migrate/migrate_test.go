package migrate

import (
	"slices"
	"testing"
	"testing/fstest"
)

func TestNames(t *testing.T) {
	fsys := fstest.MapFS{
		"migration/0002_b.sql": {},
		"migration/0001_a.sql": {},
		"migration/README.md":  {},
		"other/0000_x.sql":     {},
		"migration/0010_c.sql": {},
	}
	got, err := Names(fsys)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"0001_a.sql", "0002_b.sql", "0010_c.sql"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestPending(t *testing.T) {
	names := []string{"0001_a.sql", "0002_b.sql", "0003_c.sql"}
	if got, want := Pending(names, []string{"0002_b.sql", "0001_a.sql"}), []string{"0003_c.sql"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := Pending(names, names); got == nil || len(got) != 0 {
		t.Errorf("got %#v, want an empty, non-nil slice", got)
	}
}
