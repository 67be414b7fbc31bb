package dbsource_test

import (
	"crypto/rand"
	"datachat/internal/testenv"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"datachat"
	"datachat/internal/dbsource"
	"datachat/internal/sharedtest"
)

// cleanups run after every test of the package: the fixtures are shared.
var (
	cleanupMu sync.Mutex
	cleanups  []func()
)

func TestMain(m *testing.M) {
	code := m.Run()
	cleanupMu.Lock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
	cleanupMu.Unlock()
	os.Exit(code)
}

func atEnd(f func()) {
	cleanupMu.Lock()
	cleanups = append(cleanups, f)
	cleanupMu.Unlock()
}

// serverURL returns the URL in env, or skips t (fails it under CI=true) with
// how to get one.
func serverURL(t *testing.T, env, how string) string {
	t.Helper()
	u := os.Getenv(env)
	if u == "" {
		testenv.Missing(t, fmt.Sprintf("set %s to run this test (database sources are tested on a real server): %s", env, how))
	}
	return u
}

func randomSuffix() string {
	b := make([]byte, 4)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// csvTable is a CSV of ../shared read for loading into a server.
type csvTable struct {
	name  string
	cols  []string
	kinds []string // int, float or text
	rows  [][]*string
}

// readCSV reads data/csv/NAME.csv of ../shared, with each column's kind: int
// when every value is an integer, float when every value is a number, else
// text. Empty fields are NULL.
func readCSV(t testing.TB, name string) csvTable {
	t.Helper()
	f, err := os.Open(sharedtest.Path(t, "data/csv/"+name+".csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("read %s.csv: %v", name, err)
	}
	ct := csvTable{name: name, cols: recs[0]}
	ct.kinds = make([]string, len(ct.cols))
	for i := range ct.cols {
		ct.kinds[i] = "int"
	}
	for _, rec := range recs[1:] {
		row := make([]*string, len(rec))
		for i, v := range rec {
			if v == "" {
				continue
			}
			row[i] = &rec[i]
			if ct.kinds[i] == "int" {
				if _, err := strconv.ParseInt(v, 10, 64); err != nil {
					ct.kinds[i] = "float"
				}
			}
			if ct.kinds[i] == "float" {
				if _, err := strconv.ParseFloat(v, 64); err != nil {
					ct.kinds[i] = "text"
				}
			}
		}
		ct.rows = append(ct.rows, row)
	}
	return ct
}

var csvNames = []string{"penguins", "tips", "titanic"}

// wantRefused asserts err is a *QueryError of the sandbox's refusal (or of
// kind, if given) whose message contains each of want.
func wantKind(t *testing.T, err error, kind string, want ...string) {
	t.Helper()
	var qe *dbsource.QueryError
	if !errors.As(err, &qe) {
		t.Fatalf("got error %v (%T), want a QueryError of kind %q", err, err, kind)
	}
	if qe.Kind != kind {
		t.Fatalf("got kind %q (%s), want %q", qe.Kind, qe.Message, kind)
	}
	if datachat.ErrorCode(err) != datachat.EINVALID {
		t.Errorf("got code %q, want %q", datachat.ErrorCode(err), datachat.EINVALID)
	}
	for _, w := range want {
		if !strings.Contains(strings.ToLower(qe.Message), strings.ToLower(w)) {
			t.Errorf("message %q does not say %q", qe.Message, w)
		}
	}
}

// wantRole asserts err is a *RoleError naming privilege.
func wantRole(t *testing.T, err error, privilege string) {
	t.Helper()
	var re *dbsource.RoleError
	if !errors.As(err, &re) {
		t.Fatalf("got error %v (%T), want a RoleError naming %s", err, err, privilege)
	}
	if !strings.Contains(re.Error(), privilege) {
		t.Errorf("role error %q does not name %s", re.Error(), privilege)
	}
	if strings.Contains(re.Error(), "pw-") {
		t.Errorf("role error %q shows a password", re.Error())
	}
}

func asQueryError(err error, qe **dbsource.QueryError) bool { return errors.As(err, qe) }
