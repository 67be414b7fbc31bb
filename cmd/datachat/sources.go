package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"datachat"
	"datachat/internal/dbsource"
	"datachat/internal/workspace"
)

const sourcesUsage = `Usage: datachat sources add NAME --url URL [--tables PATTERNS] [--users NAMES | --all-users]
       datachat sources list
       datachat sources remove NAME

Database sources are PostgreSQL or MySQL/MariaDB databases that the users
they are granted to may attach to a conversation: the model then queries them
where the data is, read-only, with execute_sql and the source's name.

add connects to the database and refuses a role that could escape read-only
(a superuser, FILE, SUPER, pg_read_server_files…), naming the privilege to
drop; then it stores the URL sealed with the server's key (DATACHAT_SECRET_KEY,
or the key file secret.key made in the data directory on first use). NAME is
lower-case letters, digits and _. The URL's password never reaches the model,
the page, the API or the logs; --url - reads the URL from stdin, so that it
stays out of the shell's history.

list prints each source's name, kind, URL without its password, tables,
users and origin; remove detaches a source from every conversation (a
running serve stops using it at its next query).

Sources can also be listed under DATACHAT_SOURCES in the --config file; serve
applies that list when it starts (see README.md).
`

func sourcesAddFlags(fs *flag.FlagSet, f *cmdFlags) {
	fs.StringVar(&f.url, "url", "", "the database's `URL`: postgres://USER:PASSWORD@HOST:PORT/DB or mysql://…; - reads it from stdin")
	fs.StringVar(&f.tables, "tables", "", "the tables queries may read, comma-separated `PATTERNS` SCHEMA.TABLE with * and ? (default: every table of the default schema)")
	fs.StringVar(&f.users, "users", "", "the user `NAMES` who may attach the source, comma-separated")
	fs.BoolVar(&f.allUsers, "all-users", false, "every user may attach the source")
}

// parseSources reads `sources add|list|remove`'s arguments. add takes its
// NAME before or after the flags.
func (m *Main) parseSources(args []string) error {
	f := &m.flags
	args, err := m.subcommand("sources", args, "add", "add", "list", "remove")
	if err != nil {
		return err
	}
	var name string
	if f.sub == "add" && len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	fs := commandFlags("sources", f.sub, f)
	usageText := helpText("sources", commandFlags("sources", "add", &cmdFlags{}))
	if m.Args, err = m.parseArgs(fs, args, usageText); err != nil {
		return err
	}
	wrong := func(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...), usageText} }
	switch f.sub {
	case "add":
		if name == "" && len(m.Args) == 1 {
			name, m.Args = m.Args[0], nil
		}
		switch {
		case name == "" || len(m.Args) > 0:
			return wrong("sources add: want one NAME: datachat sources add NAME --url URL")
		case strings.TrimSpace(f.url) == "":
			return wrong("sources add: want --url URL (postgres://… or mysql://…; - to read it from stdin)")
		case f.users != "" && f.allUsers:
			return wrong("sources add: give --users or --all-users, not both")
		}
		m.Args = []string{name}
	case "list":
		if len(m.Args) > 0 {
			return wrong("sources list takes no arguments, got %q", m.Args)
		}
	case "remove":
		if len(m.Args) != 1 {
			return wrong("sources remove: want the source's NAME (see sources list)")
		}
	}
	return nil
}

// splitList splits a comma-separated flag, dropping empty items and
// repeats.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// sourceOptions bound a source's queries as the files' are.
func (m *Main) sourceOptions() dbsource.Options {
	return dbsource.Options{Timeout: m.Config.QueryTimeout}
}

// newSources is the server's database sources over st.
func (m *Main) newSources(st datachat.Store) *workspace.Sources {
	s := &workspace.Sources{
		Store: st, SecretKey: m.Config.SecretKey, DataDir: m.Config.DataDir,
		Options: m.sourceOptions(), Logger: m.Logger,
	}
	m.closers = append(m.closers, s.Close)
	return s
}

// loadSecrets returns the key that seals sources' URLs: DATACHAT_SECRET_KEY,
// or the key file in the data directory, made (mode 0600) when create is
// set and it does not exist yet; without it and without create, nil.
func (m *Main) loadSecrets(create bool) (*dbsource.Secrets, error) {
	cfg := m.Config
	if cfg.SecretKey == "" && !create {
		if _, err := os.Stat(filepath.Join(cfg.DataDir, dbsource.KeyFile)); errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
	}
	sec, created, err := dbsource.LoadSecrets(cfg.SecretKey, cfg.DataDir)
	if err != nil {
		return nil, err
	}
	if created {
		p := filepath.Join(cfg.DataDir, dbsource.KeyFile)
		if m.Command == "serve" {
			m.Logger.Warn("created the key that seals database sources' credentials: back it up with the data; without it they cannot be opened",
				slog.String("key_file", p))
		} else {
			fmt.Fprintf(m.Stderr, "created %s (mode 0600), the key that seals database sources' credentials: back it up with the data; without it (or DATACHAT_SECRET_KEY) the sources cannot be opened\n", p)
		}
	}
	return sec, nil
}

// checkSource opens src (validated) and checks that the database answers
// and that its role cannot escape read-only; it returns the tables queries
// may read.
func (m *Main) checkSource(ctx context.Context, src *dbsource.Source) ([]dbsource.Table, error) {
	db, err := dbsource.Open(*src, m.sourceOptions())
	if err != nil {
		return nil, err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := db.Check(ctx); err != nil {
		return nil, err
	}
	return db.Catalog(ctx)
}

func (m *Main) runSources(ctx context.Context) error {
	st, err := m.openStore(ctx)
	if err != nil {
		return err
	}
	switch m.flags.sub {
	case "add":
		return m.sourcesAdd(ctx, st)
	case "list":
		return m.sourcesList(ctx, st)
	case "remove":
		name := m.Args[0]
		src, err := st.DBSource(ctx, name)
		if err == nil {
			err = st.DeleteDBSource(ctx, name)
		}
		if err != nil {
			return fmt.Errorf("sources remove: %s", datachat.ErrorMessage(err))
		}
		fmt.Fprintf(m.Stderr, "removed source %s, detached from every conversation (a running serve stops using it at its next query)\n", name)
		if src.Origin == datachat.OriginConfig {
			fmt.Fprintf(m.Stderr, "it came from DATACHAT_SOURCES in a --config file: serve adds it again when it starts unless it is taken out of the file\n")
		}
		return m.record(ctx, sourceEvent(datachat.AuditSourceRemoved, name, "detached from every conversation; it was "+grantText(src)), nil)
	}
	return fmt.Errorf("sources: unknown subcommand %q", m.flags.sub)
}

func (m *Main) sourcesAdd(ctx context.Context, st datachat.Store) error {
	f := m.flags
	url := strings.TrimSpace(f.url)
	if url == "-" {
		in := m.Stdin
		if in == nil {
			in = os.Stdin
		}
		line, err := bufio.NewReader(in).ReadString('\n')
		if err != nil && line == "" {
			return fmt.Errorf("sources add: --url -: no URL on stdin")
		}
		url = strings.TrimSpace(line)
	}
	src := &dbsource.Source{Name: m.Args[0], URL: url, Tables: splitList(f.tables), AllUsers: f.allUsers}
	if f.users != "" {
		src.Users = splitList(f.users)
	}
	if err := src.Validate(); err != nil {
		return fmt.Errorf("sources add: %s", datachat.ErrorMessage(err))
	}
	if _, err := st.DBSource(ctx, src.Name); err == nil {
		return fmt.Errorf("sources add: a source named %s exists; remove it first (datachat sources remove %s)", src.Name, src.Name)
	}
	tables, err := m.checkSource(ctx, src)
	if err != nil {
		return fmt.Errorf("sources add: %s", sourceError(src, err))
	}
	sec, err := m.loadSecrets(true)
	if err != nil {
		return fmt.Errorf("sources add: %w", err)
	}
	sealed, err := sec.Seal(src.URL)
	if err != nil {
		return err
	}
	def := &datachat.DBSource{Name: src.Name, Kind: src.Kind, SealedURL: sealed, Tables: src.Tables,
		Users: src.Users, AllUsers: src.AllUsers, Origin: datachat.OriginCLI}
	if err := st.CreateDBSource(ctx, def); err != nil {
		return fmt.Errorf("sources add: %s", datachat.ErrorMessage(err))
	}
	if err := m.record(ctx, sourceEvent(datachat.AuditSourceAdded, def.Name, sourceText(def)), func(ctx context.Context) error {
		return st.DeleteDBSource(ctx, def.Name)
	}); err != nil {
		return fmt.Errorf("sources add: %w", err)
	}
	names := make([]string, len(tables))
	for i, t := range tables {
		names[i] = t.Schema + "." + t.Name
	}
	fmt.Fprintf(m.Stderr, "added source %s (%s, %s): %s; %s\n", src.Name, src.Kind, dbsource.Redact(src.URL), tablesText(names), grantText(def))
	if len(tables) == 0 {
		fmt.Fprintf(m.Stderr, "warning: no table the role may read matches --tables %s: queries on %s can read nothing\n", strings.Join(src.Tables, ","), src.Name)
	}
	return nil
}

// sourceError says why a source was refused, without its credentials: the
// role's privilege, or the database not answering (the drivers' messages
// name the host and user, never the password).
func sourceError(src *dbsource.Source, err error) string {
	var re *dbsource.RoleError
	if errors.As(err, &re) {
		return re.Error()
	}
	if datachat.ErrorCode(err) == datachat.EINVALID {
		return datachat.ErrorMessage(err)
	}
	return fmt.Sprintf("source %s: %s does not answer: %s", src.Name, dbsource.Redact(src.URL), strings.ReplaceAll(err.Error(), src.URL, dbsource.Redact(src.URL)))
}

func tablesText(names []string) string {
	switch len(names) {
	case 0:
		return "no tables"
	case 1:
		return "1 table, " + names[0]
	}
	if len(names) > 10 {
		return fmt.Sprintf("%d tables, %s…", len(names), strings.Join(names[:10], ", "))
	}
	return fmt.Sprintf("%d tables, %s", len(names), strings.Join(names, ", "))
}

func grantText(s *datachat.DBSource) string {
	switch {
	case s.AllUsers:
		return "granted to every user"
	case len(s.Users) == 0:
		return "granted to no user yet (add it again with --users or --all-users)"
	}
	return "granted to " + strings.Join(s.Users, ", ")
}

func (m *Main) sourcesList(ctx context.Context, st datachat.Store) error {
	list, err := st.DBSources(ctx)
	if err != nil {
		return err
	}
	var sec *dbsource.Secrets
	if len(list) > 0 {
		if sec, err = m.loadSecrets(false); err != nil {
			return fmt.Errorf("sources list: %w", err)
		}
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tURL\tTABLES\tUSERS\tORIGIN\tCREATED")
	for _, s := range list {
		url := "(sealed with a key that is not here: set DATACHAT_SECRET_KEY)"
		if sec != nil {
			if plain, err := sec.Open(s.SealedURL); err == nil {
				url = dbsource.Redact(plain)
			} else {
				url = "(" + err.Error() + ")"
			}
		}
		users := strings.Join(s.Users, ",")
		switch {
		case s.AllUsers:
			users = "(all users)"
		case users == "":
			users = "(none)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Kind, url, strings.Join(s.Tables, ","), users, s.Origin,
			s.CreatedAt.Format(time.RFC3339))
	}
	return tw.Flush()
}

// applySourceConfig makes the store's sources from the --config file match
// DATACHAT_SOURCES, when it is set: new and changed ones are checked as
// `sources add` checks them (a role that could escape read-only, or a
// database that does not answer, stops serve) and stored sealed; unchanged
// ones are left as they are; those an earlier file added and this one does
// not list are removed. Sources added with `datachat sources add` are never
// touched: a file source of the same name is an error.
func (m *Main) applySourceConfig(ctx context.Context, st datachat.Store) error {
	want := m.Config.Sources
	stored, err := st.DBSources(ctx)
	if err != nil {
		return err
	}
	if want == nil {
		n := 0
		for _, s := range stored {
			if s.Origin == datachat.OriginConfig {
				n++
			}
		}
		if n > 0 {
			m.Logger.Info("database sources from an earlier DATACHAT_SOURCES kept: it is not set now", slog.Int("count", n))
		}
		return nil
	}
	byName := map[string]*datachat.DBSource{}
	for _, s := range stored {
		byName[s.Name] = s
	}
	var sec *dbsource.Secrets
	if len(want) > 0 {
		if sec, err = m.loadSecrets(true); err != nil {
			return fmt.Errorf("DATACHAT_SOURCES: %w", err)
		}
	}
	listed := map[string]bool{}
	for _, sc := range want {
		src := &dbsource.Source{Name: sc.Name, URL: sc.URL, Tables: slices.Clone(sc.Tables), Users: slices.Clone(sc.Users), AllUsers: sc.AllUsers}
		if err := src.Validate(); err != nil {
			return fmt.Errorf("DATACHAT_SOURCES: %s", datachat.ErrorMessage(err))
		}
		listed[src.Name] = true
		old := byName[src.Name]
		if old != nil && old.Origin != datachat.OriginConfig {
			return fmt.Errorf("DATACHAT_SOURCES: source %s was added with `datachat sources add`: remove it first (datachat sources remove %s), or name the file's source otherwise", src.Name, src.Name)
		}
		if old != nil && sameConfigSource(sec, old, src) {
			continue
		}
		tables, err := m.checkSource(ctx, src)
		if err != nil {
			return fmt.Errorf("DATACHAT_SOURCES: %s", sourceError(src, err))
		}
		sealed, err := sec.Seal(src.URL)
		if err != nil {
			return err
		}
		def := &datachat.DBSource{Name: src.Name, Kind: src.Kind, SealedURL: sealed, Tables: src.Tables,
			Users: src.Users, AllUsers: src.AllUsers, Origin: datachat.OriginConfig}
		if old == nil {
			err = st.CreateDBSource(ctx, def)
		} else {
			err = st.UpdateDBSource(ctx, def)
		}
		if err != nil {
			return fmt.Errorf("DATACHAT_SOURCES: source %s: %w", src.Name, err)
		}
		if err := m.recordConfigSource(ctx, st, sec, old, def, src.URL); err != nil {
			return fmt.Errorf("DATACHAT_SOURCES: %w", err)
		}
		what := "database source added from DATACHAT_SOURCES"
		if old != nil {
			what = "database source changed by DATACHAT_SOURCES"
		}
		m.Logger.Info(what, slog.Any("source", *src), slog.Int("tables", len(tables)), slog.String("granted", grantText(def)))
	}
	for _, s := range stored {
		if s.Origin == datachat.OriginConfig && !listed[s.Name] {
			if err := st.DeleteDBSource(ctx, s.Name); err != nil && datachat.ErrorCode(err) != datachat.ENOTFOUND {
				return fmt.Errorf("DATACHAT_SOURCES: remove source %s: %w", s.Name, err)
			}
			ev := sourceEvent(datachat.AuditSourceRemoved, s.Name, "DATACHAT_SOURCES no longer lists it; detached from every conversation; it was "+grantText(s))
			if err := m.record(ctx, ev, nil); err != nil {
				return fmt.Errorf("DATACHAT_SOURCES: %w", err)
			}
			m.Logger.Info("database source removed: DATACHAT_SOURCES no longer lists it", slog.String("source", s.Name))
		}
	}
	return nil
}

// sameConfigSource reports whether a stored source is what src defines.
func sameConfigSource(sec *dbsource.Secrets, old *datachat.DBSource, src *dbsource.Source) bool {
	url, err := sec.Open(old.SealedURL)
	return err == nil && url == src.URL && old.Kind == src.Kind && slices.Equal(old.Tables, src.Tables) &&
		slices.Equal(old.Users, nonNilList(src.Users)) && old.AllUsers == src.AllUsers
}

func nonNilList(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

// sourceEvent is the audit record of a change to a source.
func sourceEvent(kind, name, detail string) *datachat.AuditEvent {
	return &datachat.AuditEvent{Kind: kind, Outcome: datachat.AuditOK, Source: name, Target: name, Detail: detail}
}

// sourceText describes a source for the audit log: never its URL.
func sourceText(s *datachat.DBSource) string {
	tables := "every table of the default schema"
	if len(s.Tables) > 0 {
		tables = "tables " + strings.Join(s.Tables, ",")
	}
	return fmt.Sprintf("%s, %s, %s (origin %s)", s.Kind, tables, grantText(s), s.Origin)
}

// recordConfigSource records a source DATACHAT_SOURCES added (old nil) or
// changed to def, whose URL is url: source.granted when whom it is granted
// to changed (its Detail names any other change too), else source.changed.
// A change the audit log cannot record is undone: the source is removed, or
// given back its old definition.
func (m *Main) recordConfigSource(ctx context.Context, st datachat.Store, sec *dbsource.Secrets, old, def *datachat.DBSource, url string) error {
	if old == nil {
		return m.record(ctx, sourceEvent(datachat.AuditSourceAdded, def.Name, "from DATACHAT_SOURCES: "+sourceText(def)),
			func(ctx context.Context) error { return st.DeleteDBSource(ctx, def.Name) })
	}
	var changes []string
	kind := datachat.AuditSourceChanged
	if grantText(old) != grantText(def) {
		kind = datachat.AuditSourceGranted
		changes = append(changes, grantText(old)+" → "+grantText(def))
	}
	if before, err := sec.Open(old.SealedURL); err != nil || old.Kind != def.Kind || before != url {
		changes = append(changes, "its URL changed")
	}
	if !slices.Equal(old.Tables, def.Tables) {
		changes = append(changes, fmt.Sprintf("tables %s → %s", strings.Join(old.Tables, ","), strings.Join(def.Tables, ",")))
	}
	return m.record(ctx, sourceEvent(kind, def.Name, "from DATACHAT_SOURCES: "+strings.Join(changes, "; ")),
		func(ctx context.Context) error { return st.UpdateDBSource(ctx, old) })
}
