package config

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"datachat/internal/yamlsafe"
)

// SourceConfig is one database source of DATACHAT_SOURCES: the keys of
// `datachat sources add NAME --url … [--tables …] [--users …|--all-users]`.
// serve applies the list at start (cmd/datachat); internal/dbsource checks
// each entry fully.
type SourceConfig struct {
	Name     string
	URL      string
	Tables   []string
	Users    []string
	AllUsers bool
}

// String names the source without its URL, which holds credentials.
func (s SourceConfig) String() string { return "source " + s.Name }

// sourceKeys are the keys of a DATACHAT_SOURCES entry.
var sourceKeys = []string{"name", "url", "tables", "users", "all_users"}

// sources parses DATACHAT_SOURCES: a YAML (or JSON) list of mappings with the
// keys name, url, tables, users and all_users; tables and users are lists or
// comma-separated strings.
func (p *parser) sources(key string) []SourceConfig {
	v, ok := p.raw(key)
	if !ok {
		return nil
	}
	var raw []map[string]any
	if err := yamlsafe.Unmarshal(context.Background(), []byte(v), &raw, yamlsafe.Options{What: key}); err != nil {
		// The value holds credentials: never quote it.
		p.errs = append(p.errs, fmt.Errorf("%s is not valid: accepts a list of sources, each a mapping of %s (the value is not shown: it holds credentials)", key, strings.Join(sourceKeys, ", ")))
		return nil
	}
	var out []SourceConfig
	seen := map[string]bool{}
	for i, m := range raw {
		where := fmt.Sprintf("%s entry %d", key, i+1)
		if name, ok := m["name"].(string); ok && name != "" {
			where = fmt.Sprintf("%s entry %d (%s)", key, i+1, name)
		}
		bad := func(format string, args ...any) {
			p.errs = append(p.errs, fmt.Errorf("%s: %s", where, fmt.Sprintf(format, args...)))
		}
		var s SourceConfig
		okEntry := true
		for k, val := range m {
			switch strings.ToLower(k) {
			case "name":
				s.Name = strings.TrimSpace(fmt.Sprint(val))
			case "url":
				str, isStr := val.(string)
				if !isStr {
					bad("url: want a string, postgres://USER:PASSWORD@HOST:PORT/DB or mysql://…")
					okEntry = false
				}
				s.URL = strings.TrimSpace(str)
			case "tables", "users":
				list, err := stringList(val)
				if err != nil {
					bad("%s: %v", k, err)
					okEntry = false
				}
				if k == "tables" {
					s.Tables = list
				} else {
					s.Users = list
					if s.Users == nil {
						s.Users = []string{}
					}
				}
			case "all_users":
				b, isBool := val.(bool)
				if !isBool {
					bad("all_users: want true or false")
					okEntry = false
				}
				s.AllUsers = b
			default:
				bad("unknown key %q: want %s", k, strings.Join(sourceKeys, ", "))
				okEntry = false
			}
		}
		switch {
		case s.Name == "":
			bad("no name")
		case s.URL == "":
			bad("no url")
		case seen[s.Name]:
			bad("a second source named %s", s.Name)
		case s.Users != nil && s.AllUsers:
			bad("give users or all_users, not both")
		default:
			if okEntry {
				out = append(out, s)
			}
		}
		seen[s.Name] = true
	}
	if out == nil {
		out = []SourceConfig{} // set, and empty: serve removes the sources an earlier file added
	}
	return out
}

// stringList reads a list of strings, or one comma-separated string.
func stringList(v any) ([]string, error) {
	var parts []string
	switch v := v.(type) {
	case nil:
		return nil, nil
	case string:
		parts = strings.Split(v, ",")
	case []any:
		for _, e := range v {
			switch e.(type) {
			case map[string]any, []any:
				return nil, fmt.Errorf("want a list of names, or names separated by commas")
			}
			parts = append(parts, fmt.Sprint(e))
		}
	default:
		return nil, fmt.Errorf("want a list of names, or names separated by commas")
	}
	var out []string
	for _, s := range parts {
		if s = strings.TrimSpace(s); s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out, nil
}

// secretKey reads DATACHAT_SECRET_KEY: 32 random bytes in standard base64,
// as `openssl rand -base64 32` prints (the format internal/dbsource reads).
func (p *parser) secretKey(key string) string {
	v, ok := p.raw(key)
	if !ok {
		return ""
	}
	if b, err := base64.StdEncoding.DecodeString(v); err != nil || len(b) != 32 {
		// A secret: never quote it.
		p.errs = append(p.errs, fmt.Errorf("%s is not valid: accepts 32 bytes in standard base64, 44 characters, as `openssl rand -base64 32` prints (the value is not shown)", key))
		return ""
	}
	return v
}

// yamlText turns a value read from the --config file back into text that
// sources reads again: JSON, which is YAML.
func yamlText(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}
