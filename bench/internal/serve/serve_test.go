package serve

import (
	"maps"
	"os"
	"slices"
	"testing"
)

func TestParseEnv(t *testing.T) {
	got, err := ParseEnv(" GOGC=200, ,DATACHAT_SQL_WORKERS=4,EMPTY=")
	want := map[string]string{"GOGC": "200", "DATACHAT_SQL_WORKERS": "4", "EMPTY": ""}
	if err != nil || !maps.Equal(got, want) {
		t.Errorf("got %v, %v; want %v", got, err, want)
	}
	if got, err := ParseEnv(""); err != nil || len(got) != 0 {
		t.Errorf("empty: got %v, %v; want none", got, err)
	}
	if _, err := ParseEnv("GOGC=200,GOMAXPROCS"); err == nil || err.Error() != `"GOMAXPROCS" is not KEY=VALUE` {
		t.Errorf("a pair without =: got %v", err)
	}
}

func TestParseLevels(t *testing.T) {
	if got, err := ParseLevels("100, 500,1000"); err != nil || !slices.Equal(got, []int{100, 500, 1000}) {
		t.Errorf("got %v, %v; want [100 500 1000]", got, err)
	}
	for _, s := range []string{"", "100,", "0", "-5", "10,x"} {
		if got, err := ParseLevels(s); err == nil {
			t.Errorf("%q: got %v, want an error", s, got)
		}
	}
	if _, err := ParseLevels("1,two"); err == nil || err.Error() != `"two" is not a positive number` {
		t.Errorf("1,two: got %v", err)
	}
}

// WorkDir's function removes the directory, unless it is kept.
func TestWorkDir(t *testing.T) {
	for _, keep := range []bool{false, true} {
		dir, done, err := WorkDir("servetest", keep)
		if err != nil {
			t.Fatal(err)
		}
		done()
		_, err = os.Stat(dir)
		if kept := err == nil; kept != keep {
			t.Errorf("keep %v: the directory is kept: %v", keep, kept)
		}
		os.RemoveAll(dir)
	}
}
