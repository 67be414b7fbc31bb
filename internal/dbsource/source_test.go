package dbsource

import (
	"bytes"
	"datachat/internal/sqlvalue"
	"encoding/base64"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"datachat"
)

func TestSecrets(t *testing.T) {
	dir := t.TempDir()
	s, created, err := LoadSecrets("", dir)
	if err != nil || !created {
		t.Fatalf("LoadSecrets: %v, created=%v", err, created)
	}
	fi, err := os.Stat(filepath.Join(dir, KeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, mode %v, want 0600", err, fi.Mode().Perm())
	}
	const u = "postgres://reader:s3cret@db.internal:5432/sales"
	sealed, err := s.Seal(u)
	if err != nil || !strings.HasPrefix(sealed, "v1:") || strings.Contains(sealed, "s3cret") {
		t.Fatalf("Seal: %q, %v", sealed, err)
	}
	again, _ := s.Seal(u)
	if again == sealed {
		t.Errorf("two seals of one URL are equal: the nonce is not fresh")
	}
	s2, created, err := LoadSecrets("", dir)
	if err != nil || created {
		t.Fatalf("LoadSecrets again: %v, created=%v", err, created)
	}
	if got, err := s2.Open(sealed); err != nil || got != u {
		t.Errorf("Open with the reloaded key: %q, %v", got, err)
	}
	// DATACHAT_SECRET_KEY wins, and another key does not open the value.
	other := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	s3, _, err := LoadSecrets(other, dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s3.Open(sealed); err == nil || !strings.Contains(err.Error(), "wrong key") {
		t.Errorf("Open with another key: %v", err)
	}
	tampered := sealed[:len(sealed)-2] + "AA"
	if _, err := s2.Open(tampered); err == nil {
		t.Errorf("Open of an altered value succeeded")
	}
	for _, bad := range []string{"abc", base64.StdEncoding.EncodeToString([]byte("short"))} {
		if _, _, err := LoadSecrets(bad, dir); datachat.ErrorCode(err) != datachat.EINVALID || !strings.Contains(err.Error(), "DATACHAT_SECRET_KEY") {
			t.Errorf("LoadSecrets(%q): %v, want EINVALID naming DATACHAT_SECRET_KEY", bad, err)
		}
	}
	os.Chmod(filepath.Join(dir, KeyFile), 0o644)
	if _, _, err := LoadSecrets("", dir); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a key file others may read: %v", err)
	}
}

func TestValidateAndRedact(t *testing.T) {
	s := Source{Name: "sales", URL: "postgres://reader:s3cret@db:5432/sales?sslmode=require&password=other"}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	if s.Kind != KindPostgres || !slices.Equal(s.Tables, []string{"*"}) {
		t.Errorf("got kind %q tables %v", s.Kind, s.Tables)
	}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("added", "source", s)
	for _, out := range []string{Redact(s.URL), s.String(), logged.String()} {
		if strings.Contains(out, "s3cret") || strings.Contains(out, "other") || !strings.Contains(out, "reader") {
			t.Errorf("redacted: %s", out)
		}
	}
	if got := Redact("::not a url"); strings.Contains(got, "not a url") {
		t.Errorf("Redact of a bad URL: %q", got)
	}
	for _, bad := range []Source{
		{Name: "Bad Name", URL: "postgres://u:p@h/db"},
		{Name: "x", URL: "http://u:p@h/db"},
		{Name: "x", URL: "postgres://h/db"},
		{Name: "x", URL: "mysql://u:p@h/"},
		{Name: "x", URL: "mysql://u:p@h/db", Tables: []string{"a.b.c"}},
		{Name: "x", URL: "mysql://u:p@h/db", Users: []string{"a"}, AllUsers: true},
	} {
		if err := bad.Validate(); datachat.ErrorCode(err) != datachat.EINVALID {
			t.Errorf("Validate(%+v): %v, want EINVALID", bad, err)
		} else if strings.Contains(err.Error(), ":p@") {
			t.Errorf("the error shows the password: %v", err)
		}
	}
	my := Source{Name: "shop", URL: "mariadb://u:p@h:3306/shop", Users: []string{"alice"}}
	if err := my.Validate(); err != nil || my.Kind != KindMySQL || !my.Allows("alice") || my.Allows("bob") {
		t.Errorf("MySQL source: %v %+v", err, my)
	}
}

func TestAllowList(t *testing.T) {
	a := newAllowList([]string{"public.*", "sales.orders", "t?ps", "*.audit_*"}, "public")
	for _, c := range []struct {
		schema, table string
		want          bool
	}{
		{"public", "penguins", true}, {"sales", "orders", true}, {"sales", "customers", false},
		{"public", "tips", true}, {"secret", "audit_log", true}, {"secret", "creds", false},
		{"Public", "penguins", false},
	} {
		if got := a.allowed(c.schema, c.table); got != c.want {
			t.Errorf("allowed(%s.%s) = %v, want %v", c.schema, c.table, got, c.want)
		}
	}
}

func TestValues(t *testing.T) {
	cl := &cells{maxCell: 1 << 20}
	for _, c := range []struct {
		got, want any
	}{
		{intText("9007199254740993"), "9007199254740993"},
		{intText("-42"), int64(-42)},
		{myValue([]byte("18446744073709551615"), "UNSIGNED BIGINT", cl), "18446744073709551615"},
		{myValue([]byte{0x01, 0x02}, "BIT", cl), int64(258)},
		{myValue([]byte("2024-01-02 03:04:05"), "TIMESTAMP", cl), "2024-01-02T03:04:05Z"},
		{myValue(nil, "INT", cl), nil},
		{sqlvalue.Interval(14, 3, -1_500_000), "P1Y2M3DT-1.5S"},
		{formatClock(-(838*3600 + 59*60 + 59) * 1_000_000), "-838:59:59"},
		{sample(strings.Repeat("x", 50)), strings.Repeat("x", 39) + "…"},
		{sample("a\nb   c"), "a b c"},
	} {
		if c.got != c.want {
			t.Errorf("got %#v, want %#v", c.got, c.want)
		}
	}
}

func TestQuoteIdent(t *testing.T) {
	for _, c := range []struct{ kind, name, want string }{
		{KindPostgres, "Name/Alias", `"Name/Alias"`},
		{KindPostgres, `a"b`, `"a""b"`},
		{KindMySQL, "Current?", "`Current?`"},
		{KindMySQL, "a`b", "`a``b`"},
		{KindMySQL, "table", "`table`"},
	} {
		if got := QuoteIdent(c.kind, c.name); got != c.want {
			t.Errorf("QuoteIdent(%s, %q) = %s, want %s", c.kind, c.name, got, c.want)
		}
	}
	if got := (Table{Schema: "shop", Name: "cabinet-turnover"}).QualifiedName(KindMySQL); got != "`shop`.`cabinet-turnover`" {
		t.Errorf("QualifiedName: %s", got)
	}
}

// TestDeriveKey: a derived key is the same for the same server key and
// purpose, and differs for another purpose, another key, and from the key
// itself.
func TestDeriveKey(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	s, err := NewSecrets(key)
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := NewSecrets(key)
	other, _ := NewSecrets(bytes.Repeat([]byte{8}, 32))
	a, b := s.DeriveKey("datachat sso"), s2.DeriveKey("datachat sso")
	if len(a) != 32 || !bytes.Equal(a, b) {
		t.Fatalf("derived twice: %x, %x; want the same 32 bytes", a, b)
	}
	for what, k := range map[string][]byte{
		"another purpose": s.DeriveKey("datachat other"),
		"another key":     other.DeriveKey("datachat sso"),
		"the key itself":  key,
	} {
		if bytes.Equal(a, k) {
			t.Errorf("%s gives the same key", what)
		}
	}
}
