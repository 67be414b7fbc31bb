package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestOIDC(t *testing.T) {
	c, err := Load("", env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.PublicURL != "" || !reflect.DeepEqual(c.OIDC, OIDC{}) {
		t.Errorf("defaults: got public URL %q, OIDC %+v; want none", c.PublicURL, c.OIDC)
	}

	c, err = Load("", env(map[string]string{
		"DATACHAT_PUBLIC_URL":           "https://chat.example.com/",
		"DATACHAT_OIDC_ISSUER":          "https://example.okta.com/oauth2/default/",
		"DATACHAT_OIDC_CLIENT_ID":       "datachat",
		"DATACHAT_OIDC_CLIENT_SECRET":   "s3cret",
		"DATACHAT_OIDC_ALLOWED_DOMAINS": "Example.com, example.org,",
		"DATACHAT_OIDC_ADMIN_GROUP":     "datachat-admins",
		"DATACHAT_OIDC_GROUPS_CLAIM":    "roles",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := OIDC{
		Issuer:   "https://example.okta.com/oauth2/default/", // the trailing slash is kept: the issuer is compared exactly
		ClientID: "datachat", ClientSecret: "s3cret", AllowedDomains: []string{"example.com", "example.org"},
		AdminGroup: "datachat-admins", GroupsClaim: "roles",
	}
	if c.PublicURL != "https://chat.example.com" || !reflect.DeepEqual(c.OIDC, want) {
		t.Errorf("got public URL %q, OIDC %+v\nwant %+v", c.PublicURL, c.OIDC, want)
	}

	// A provider on this machine may answer over http.
	for _, issuer := range []string{"http://127.0.0.1:5556/dex", "http://localhost:8080/realms/x", "http://[::1]:9000"} {
		if _, err := Load("", env(map[string]string{
			"DATACHAT_PUBLIC_URL": "http://127.0.0.1:8080", "DATACHAT_OIDC_ISSUER": issuer,
			"DATACHAT_OIDC_CLIENT_ID": "c", "DATACHAT_OIDC_CLIENT_SECRET": "s",
		})); err != nil {
			t.Errorf("issuer %s: %v", issuer, err)
		}
	}
}

func TestOIDCBadValues(t *testing.T) {
	for _, tc := range []struct{ key, val string }{
		{"DATACHAT_PUBLIC_URL", "chat.example.com"},
		{"DATACHAT_PUBLIC_URL", "https://example.com/datachat"},
		{"DATACHAT_PUBLIC_URL", "https://example.com/?x=1"},
		{"DATACHAT_PUBLIC_URL", "https://user:pw@example.com"},
		{"DATACHAT_PUBLIC_URL", "ftp://example.com"},
		{"DATACHAT_OIDC_ISSUER", "http://id.example.com"},
		{"DATACHAT_OIDC_ISSUER", "http://127.0.0.1.example.com"},
		{"DATACHAT_OIDC_ISSUER", "id.example.com"},
		{"DATACHAT_OIDC_ISSUER", "https://id.example.com?tenant=x"},
		{"DATACHAT_OIDC_ALLOWED_DOMAINS", "@example.com"},
		{"DATACHAT_OIDC_ALLOWED_DOMAINS", "example.com, *.example.com"},
		{"DATACHAT_OIDC_ALLOWED_DOMAINS", ".example.com"},
		{"DATACHAT_OIDC_ALLOWED_DOMAINS", "https://example.com"},
	} {
		t.Run(tc.key+"="+tc.val, func(t *testing.T) {
			_, err := Load("", env(map[string]string{tc.key: tc.val}))
			if err == nil || !strings.Contains(err.Error(), tc.key) || !strings.Contains(err.Error(), "accepts") {
				t.Errorf("got %v, want it to name %s and what it accepts", err, tc.key)
			}
		})
	}
}

func TestOIDCNeeds(t *testing.T) {
	on := map[string]string{
		"DATACHAT_PUBLIC_URL":         "https://chat.example.com",
		"DATACHAT_OIDC_ISSUER":        "https://accounts.google.com",
		"DATACHAT_OIDC_CLIENT_ID":     "c",
		"DATACHAT_OIDC_CLIENT_SECRET": "s",
	}
	for _, tc := range []struct {
		name string
		set  map[string]string // "" unsets
		want string
	}{
		{"no public URL", map[string]string{"DATACHAT_PUBLIC_URL": ""}, "DATACHAT_OIDC_ISSUER needs DATACHAT_PUBLIC_URL"},
		{"no client ID", map[string]string{"DATACHAT_OIDC_CLIENT_ID": ""}, "DATACHAT_OIDC_ISSUER needs DATACHAT_OIDC_CLIENT_ID"},
		{"no client secret", map[string]string{"DATACHAT_OIDC_CLIENT_SECRET": ""}, "DATACHAT_OIDC_ISSUER needs DATACHAT_OIDC_CLIENT_SECRET"},
		{"groups claim without admin group", map[string]string{"DATACHAT_OIDC_GROUPS_CLAIM": "roles"}, "DATACHAT_OIDC_GROUPS_CLAIM is set but DATACHAT_OIDC_ADMIN_GROUP is not"},
		{"client ID without issuer", map[string]string{"DATACHAT_OIDC_ISSUER": ""}, "DATACHAT_OIDC_CLIENT_ID is set but DATACHAT_OIDC_ISSUER is not"},
		{"domains without issuer", map[string]string{"DATACHAT_OIDC_ISSUER": "", "DATACHAT_OIDC_CLIENT_ID": "", "DATACHAT_OIDC_CLIENT_SECRET": "", "DATACHAT_OIDC_ALLOWED_DOMAINS": "example.com"}, "DATACHAT_OIDC_ALLOWED_DOMAINS is set but DATACHAT_OIDC_ISSUER is not"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := map[string]string{}
			for k, v := range on {
				m[k] = v
			}
			for k, v := range tc.set {
				if v == "" {
					delete(m, k)
				} else {
					m[k] = v
				}
			}
			_, err := Load("", env(m))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), on["DATACHAT_OIDC_CLIENT_SECRET"]+"\"") {
				t.Errorf("the error shows the client secret: %v", err)
			}
		})
	}
	if _, err := Load("", env(on)); err != nil {
		t.Errorf("all set: %v", err)
	}
}

// From the --config file too.
func TestOIDCFromFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "datachat.yaml")
	if err := os.WriteFile(path, []byte(`DATACHAT_PUBLIC_URL: https://chat.example.com
DATACHAT_OIDC_ISSUER: https://accounts.google.com
DATACHAT_OIDC_CLIENT_ID: c
DATACHAT_OIDC_CLIENT_SECRET: s
DATACHAT_OIDC_ALLOWED_DOMAINS: [example.com, example.org]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.OIDC.AllowedDomains, ","); got != "example.com,example.org" || c.OIDC.Issuer != "https://accounts.google.com" {
		t.Errorf("got %+v", c.OIDC)
	}
}
