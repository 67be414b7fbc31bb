package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestSourcesFromFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "datachat.yaml")
	file := `DATACHAT_ADDR: 127.0.0.1:9090
DATACHAT_SOURCES:
  - name: warehouse
    url: postgres://reader:s3cret@127.0.0.1:5432/dw
    tables: [public.*, sales.orders]
    users: [alice, bob]
  - name: shop
    url: mysql://reader:s3cret@127.0.0.1:3306/shop
    tables: "orders, customers"
    all_users: true
`
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := []SourceConfig{
		{Name: "warehouse", URL: "postgres://reader:s3cret@127.0.0.1:5432/dw", Tables: []string{"public.*", "sales.orders"}, Users: []string{"alice", "bob"}},
		{Name: "shop", URL: "mysql://reader:s3cret@127.0.0.1:3306/shop", Tables: []string{"orders", "customers"}, AllUsers: true},
	}
	if !reflect.DeepEqual(c.Sources, want) {
		t.Errorf("Sources:\ngot  %+v\nwant %+v", c.Sources, want)
	}

	// Not set: nil. Set to nothing: an empty list (serve removes what an
	// earlier file added).
	c, err = Load("", env(nil))
	if err != nil || c.Sources != nil {
		t.Errorf("Sources unset: got %#v, %v; want nil", c.Sources, err)
	}
	if err := os.WriteFile(path, []byte("DATACHAT_SOURCES: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err = Load(path, env(nil))
	if err != nil || c.Sources == nil || len(c.Sources) != 0 {
		t.Errorf("Sources set to []: got %#v, %v; want an empty list", c.Sources, err)
	}
	// The environment (JSON is YAML) wins over the file.
	c, err = Load(path, env(map[string]string{"DATACHAT_SOURCES": `[{"name": "x", "url": "mysql://u:p@h/db", "users": "carol"}]`}))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Sources) != 1 || c.Sources[0].Name != "x" || !reflect.DeepEqual(c.Sources[0].Users, []string{"carol"}) {
		t.Errorf("Sources from the environment: got %+v", c.Sources)
	}
}

func TestBadSourcesNeverShowCredentials(t *testing.T) {
	for _, tc := range []struct{ value, want string }{
		{`[{"name": "a", "url": "postgres://u:s3cret@h/db", "pasword": "s3cret"}]`, `unknown key "pasword"`},
		{`[{"url": "postgres://u:s3cret@h/db"}]`, "no name"},
		{`[{"name": "a"}]`, "entry 1 (a): no url"},
		{`[{"name": "a", "url": "postgres://u:s3cret@h/db"}, {"name": "a", "url": "postgres://u:s3cret@h/db"}]`, "a second source named a"},
		{`[{"name": "a", "url": "postgres://u:s3cret@h/db", "users": ["x"], "all_users": true}]`, "not both"},
		{`[{"name": "a", "url": "postgres://u:s3cret@h/db", "all_users": "yes"}]`, "all_users: want true or false"},
		{`{"name": "a", "url": "postgres://u:s3cret@h/db"}`, "accepts a list of sources"},
		{`[{"name": "a", "url": "postgres://u:s3cret@h/db", "tables": [{"x": 1}]}]`, "tables: want a list"},
	} {
		_, err := Load("", env(map[string]string{"DATACHAT_SOURCES": tc.value}))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("DATACHAT_SOURCES=%s: got %v, want an error saying %q", tc.value, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("DATACHAT_SOURCES=%s: the error shows the password: %v", tc.value, err)
		}
	}
}

func TestSecretKey(t *testing.T) {
	good := "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=" // 32 bytes
	c, err := Load("", env(map[string]string{"DATACHAT_SECRET_KEY": " " + good + "\n"}))
	if err != nil || c.SecretKey != good {
		t.Fatalf("got %q, %v; want the key", c.SecretKey, err)
	}
	for _, bad := range []string{"c2hvcnQ=", "not base64 at all!!", good + good} {
		_, err := Load("", env(map[string]string{"DATACHAT_SECRET_KEY": bad}))
		if err == nil || !strings.Contains(err.Error(), "DATACHAT_SECRET_KEY") || !strings.Contains(err.Error(), "openssl rand -base64 32") {
			t.Errorf("DATACHAT_SECRET_KEY=%q: got %v, want an error naming the variable and how to make one", bad, err)
		} else if strings.Contains(err.Error(), bad) {
			t.Errorf("DATACHAT_SECRET_KEY=%q: the error shows the value: %v", bad, err)
		}
	}
}
