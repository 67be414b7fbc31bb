// Package dbsource runs the model's SQL where the data is: on a PostgreSQL or
// MySQL/MariaDB database that the server's operator added as a source
// (`datachat sources add`). It holds a source's definition ([Source]), the
// encryption of its credentials ([Secrets]), the connection to it ([DB]: a
// bounded pool whose role is proved on every connect, before queries and
// periodically), the catalog of its allowed tables for the system prompt
// ([DB.Catalog]), and the sandbox every query runs in ([DB.Query]):
//
//   - the database decides what a source may read: its role's grants, which
//     must be the allowed tables and no more, proved from the engine's
//     catalog (PostgreSQL: pgrole.go; MySQL/MariaDB: mygrants.go), a role
//     that could escape read-only refused;
//   - the statement checked on a real parse tree before anything of it
//     reaches the database (PostgreSQL: PostgreSQL's own parser, pgcheck.go;
//     MySQL/MariaDB: TiDB's parser, mycheck.go), and only the checked tree,
//     printed back by our code, runs: one query, only the allowed tables,
//     only allow-listed side-effect-free functions and operators, no locking
//     reads, no file, server or session functions;
//   - one statement, in a read-only transaction that is always rolled back,
//     with the statement timeout set on the server (PostgreSQL
//     statement_timeout, MariaDB max_statement_time, MySQL
//     max_execution_time), and no session state kept for the next query
//     (PostgreSQL: DISCARD ALL before the connection is reused;
//     MySQL/MariaDB: a session of its own, closed after the query);
//   - at most MaxRows rows, stopped on the server: the rest is never sent.
//
// The package is storage-agnostic: the app's store keeps sources, sealed with
// [Secrets.Seal]. It is named dbsource because datachat.Source is a document
// excerpt an answer cites.
package dbsource

import (
	"fmt"
	"log/slog"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"

	"datachat"
)

// Kinds of source: the engine it speaks to.
const (
	KindPostgres = "postgres" // PostgreSQL, URL postgres:// or postgresql://
	KindMySQL    = "mysql"    // MySQL or MariaDB, URL mysql:// or mariadb://
)

// Source is a database the operator added: `datachat sources add NAME --url …
// [--tables …] [--users …|--all-users]`. URL carries the credentials: it is
// sealed at rest ([Secrets]) and never logged ([Redact], [Source.LogValue]),
// sent to a client or shown to the model.
type Source struct {
	Name string `json:"name" yaml:"name"`
	Kind string `json:"kind" yaml:"-"` // KindPostgres or KindMySQL, from the URL's scheme
	URL  string `json:"-" yaml:"url"`
	// Tables are the tables queries may read, as patterns SCHEMA.TABLE where
	// either part may hold * and ? wildcards (public.*, sales.orders). A
	// pattern without a dot names a table of the default schema: PostgreSQL's
	// public, MySQL's database of the URL. Empty means every table of the
	// default schema. For MySQL a schema is a database.
	Tables   []string `json:"tables" yaml:"tables"`
	Users    []string `json:"users,omitempty" yaml:"users"` // user names who may attach the source
	AllUsers bool     `json:"all_users" yaml:"all_users"`   // every user may attach it
}

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)

// Validate checks s and fills its Kind and default Tables. Errors are
// datachat.EINVALID with a message naming the field.
func (s *Source) Validate() error {
	if !nameRE.MatchString(s.Name) {
		return datachat.Errorf(datachat.EINVALID, "source name %q: want lower-case letters, digits and _, starting with a letter (at most 63)", s.Name)
	}
	u, err := url.Parse(s.URL)
	if err != nil {
		return datachat.Errorf(datachat.EINVALID, "source %s: --url is not a URL (postgres://USER:PASSWORD@HOST:PORT/DB or mysql://…)", s.Name)
	}
	switch u.Scheme {
	case "postgres", "postgresql":
		s.Kind = KindPostgres
	case "mysql", "mariadb":
		s.Kind = KindMySQL
	default:
		return datachat.Errorf(datachat.EINVALID, "source %s: --url must start with postgres:// or mysql:// (got %q)", s.Name, u.Scheme+"://")
	}
	if u.Host == "" {
		return datachat.Errorf(datachat.EINVALID, "source %s: --url names no host", s.Name)
	}
	if u.User == nil || u.User.Username() == "" {
		return datachat.Errorf(datachat.EINVALID, "source %s: --url names no user (USER:PASSWORD@HOST)", s.Name)
	}
	if s.Users != nil && s.AllUsers {
		return datachat.Errorf(datachat.EINVALID, "source %s: give --users or --all-users, not both", s.Name)
	}
	if len(s.Tables) == 0 {
		if s.Kind == KindMySQL && defaultSchema(s.Kind, u) == "" {
			return datachat.Errorf(datachat.EINVALID, "source %s: give --tables, or a database in the URL (mysql://…/DB)", s.Name)
		}
		s.Tables = []string{"*"}
	}
	for i, p := range s.Tables {
		p = strings.TrimSpace(p)
		s.Tables[i] = p
		if err := checkPattern(p); err != nil {
			return datachat.Errorf(datachat.EINVALID, "source %s: --tables %q: %v", s.Name, p, err)
		}
	}
	return nil
}

// Allows reports whether the user may attach the source.
func (s *Source) Allows(user string) bool {
	return s.AllUsers || slices.Contains(s.Users, user)
}

// LogValue logs a source without its credentials.
func (s Source) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("name", s.Name),
		slog.String("kind", s.Kind),
		slog.String("url", Redact(s.URL)),
		slog.String("tables", strings.Join(s.Tables, ",")),
	)
}

// String describes a source without its credentials.
func (s Source) String() string {
	return fmt.Sprintf("%s (%s)", s.Name, Redact(s.URL))
}

// secretParams are URL query parameters that hold secrets.
var secretParams = []string{"password", "sslpassword", "passfile", "sslkey"}

// Redact returns the URL with its password and any secret parameter replaced
// by "xxxxx", for logs and listings. What does not parse as a URL is withheld
// whole.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return "(a URL that does not parse, withheld)"
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
	}
	if q := u.Query(); len(q) > 0 {
		changed := false
		for k := range q {
			if slices.Contains(secretParams, strings.ToLower(k)) {
				q.Set(k, "xxxxx")
				changed = true
			}
		}
		if changed {
			u.RawQuery = q.Encode()
		}
	}
	return u.String()
}

// defaultSchema is where unqualified patterns and names point: PostgreSQL's
// public, MySQL's database of the URL ("" if none).
func defaultSchema(kind string, u *url.URL) string {
	if kind == KindPostgres {
		return "public"
	}
	return strings.TrimPrefix(u.Path, "/")
}

func checkPattern(p string) error {
	if p == "" {
		return fmt.Errorf("an empty pattern")
	}
	parts := strings.Split(p, ".")
	if len(parts) > 2 {
		return fmt.Errorf("want SCHEMA.TABLE or TABLE, with * for any")
	}
	for _, part := range parts {
		if part == "" {
			return fmt.Errorf("want SCHEMA.TABLE or TABLE, with * for any")
		}
		if _, err := path.Match(part, ""); err != nil {
			return fmt.Errorf("bad wildcard: %v", err)
		}
	}
	return nil
}

// allowList matches schema-qualified names against a source's patterns.
type allowList struct {
	patterns [][2]string // schema, table
}

func newAllowList(patterns []string, defSchema string) allowList {
	var a allowList
	for _, p := range patterns {
		schema, table, ok := strings.Cut(p, ".")
		if !ok {
			schema, table = defSchema, p
		}
		a.patterns = append(a.patterns, [2]string{schema, table})
	}
	return a
}

// allowed reports whether schema.table matches a pattern. Names compare
// exactly, as the engine's catalog spells them.
func (a allowList) allowed(schema, table string) bool {
	for _, p := range a.patterns {
		if ok, _ := path.Match(p[0], schema); !ok {
			continue
		}
		if ok, _ := path.Match(p[1], table); ok {
			return true
		}
	}
	return false
}
