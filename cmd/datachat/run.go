package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"datachat"
	"datachat/internal/chat"
	"datachat/internal/config"
	"datachat/internal/duckdb"
	"datachat/internal/metrics"
	"datachat/internal/postgres"
	"datachat/internal/server"
	"datachat/internal/sqlite"
	"datachat/internal/sso"
)

// Main is the program: ParseFlags reads the command line and configuration, Run
// carries out the command (for serve: starts serving and returns), Close stops
// everything. Tests run it in-process on 127.0.0.1:0.
type Main struct {
	Command string
	Args    []string // the command's arguments after its flags
	flags   cmdFlags // the command's flags

	ConfigPath string
	Config     *config.Config
	Env        config.Lookup
	Stdin      io.Reader // sources add --url - reads the URL here
	Stdout     io.Writer
	Stderr     io.Writer
	Logger     *slog.Logger

	// ShutdownGrace is how long serve lets running turns finish when it
	// stops (DATACHAT_SHUTDOWN_GRACE; 0: 20s).
	ShutdownGrace time.Duration

	Store    datachat.Store
	migrated []string // the migrations openStore applied
	Server   *server.Server
	listener net.Listener
	served   chan error
	closers  []func() error
}

// NewMain returns a Main reading the process environment and writing to the
// process's standard streams.
func NewMain() *Main {
	return &Main{Env: os.LookupEnv, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
}

// ParseFlags reads the global flags, the command, its flags and arguments,
// and the configuration. After help (-h, --help, datachat help) it returns
// flag.ErrHelp, the usage written to m.Stdout; a wrong command line is a
// *usageError.
func (m *Main) ParseFlags(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("datachat", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.StringVar(&m.ConfigPath, "config", "", "YAML configuration `FILE`")
	version := fs.Bool("version", false, "print the version")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(m.Stdout, usage)
			return err
		}
		return &usageError{err.Error(), usage}
	}
	if *version {
		if fs.NArg() > 0 {
			return &usageError{fmt.Sprintf("--version takes no command, got %q", fs.Args()), usage}
		}
		m.Command = "version"
		return nil
	}
	if fs.NArg() == 0 {
		return &usageError{"no command given", usage}
	}
	m.Command = fs.Arg(0)
	if m.Command == "help" {
		return m.help(fs.Args()[1:])
	}
	if err := m.parseCommand(fs.Args()[1:]); err != nil {
		return err
	}
	if m.Command == "version" {
		return nil // needs no configuration
	}
	// --config may come after the command too (datachat serve --config
	// FILE); given on both sides, it must name the same file.
	if c := m.flags.config; c != "" {
		if m.ConfigPath != "" && m.ConfigPath != c {
			return &usageError{fmt.Sprintf("--config given twice, as %s and %s: give one file", m.ConfigPath, c), usage}
		}
		m.ConfigPath = c
	}
	cfg, err := config.Load(m.ConfigPath, m.Env)
	if err != nil {
		return fmt.Errorf("configuration:\n%w", err)
	}
	m.Config = cfg
	m.Logger = newLogger(m.Stderr, cfg, m.Command != "serve")
	if m.Env != nil {
		if v, ok := m.Env("DATACHAT_SHUTDOWN_GRACE"); ok && strings.TrimSpace(v) != "" {
			d, err := time.ParseDuration(strings.TrimSpace(v))
			if err != nil || d <= 0 {
				return fmt.Errorf("configuration:\nDATACHAT_SHUTDOWN_GRACE=%q is not valid: accepts a positive Go duration such as 20s or 500ms", v)
			}
			m.ShutdownGrace = d
		}
	}
	return nil
}

// shutdownGrace is how long serve lets running turns finish when it stops:
// DATACHAT_SHUTDOWN_GRACE, by default 20s.
func (m *Main) shutdownGrace() time.Duration {
	if m.ShutdownGrace > 0 {
		return m.ShutdownGrace
	}
	return shutdownGrace
}

// lastRepairTry is the least time serve gives, as it stops, to storing the
// turns' ends the database did not take (chat.Runner.SaveRepairs), when the
// grace was spent on running turns: enough for a database that is back to
// take them, short enough that a stop with the database away does not hang.
const lastRepairTry = 5 * time.Second

// leaseIdentity names this run of serve in the leases of the messages it
// streams (datachat.Lease): a random owner, and the node, the host name with
// the address actually listened on (no other live process can share it).
func leaseIdentity(ln net.Listener) (owner, node string) {
	b := make([]byte, 8)
	rand.Read(b)
	host, _ := os.Hostname()
	return hex.EncodeToString(b), host + "/" + ln.Addr().String()
}

// sweepLeftStreaming marks interrupted, every lease TTL, the messages left
// streaming by processes that vanished (another process on the same database,
// killed), and returns the function that stops it.
func (m *Main) sweepLeftStreaming(st datachat.Store, owner, node string) func() error {
	return every(chat.DefaultLeaseTTL, func(ctx context.Context) {
		n, err := st.InterruptStreaming(ctx, time.Now(), owner, node)
		if err != nil && ctx.Err() == nil {
			m.Logger.Warn("interrupt messages left streaming", slog.String("error", err.Error()))
		} else if n > 0 {
			m.Logger.Warn("messages left streaming by a process that is gone marked interrupted", slog.Int("count", n))
		}
	})
}

// every runs do every interval, in a goroutine, until the function it
// returns (one of serve's closers) cancels do's context and waits for the
// run in progress to end.
func every(interval time.Duration, do func(ctx context.Context)) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				do(ctx)
			}
		}
	}()
	return func() error { cancel(); <-done; return nil }
}

// newLogger logs as DATACHAT_LOG_LEVEL and DATACHAT_LOG_FORMAT say. Where
// they are not set, serve logs from info up in JSON, for a log collector, or
// as text (durations such as 1m30s, not nanoseconds) when its stderr is a
// terminal, for a person; the other commands (oneShot) log warnings and
// errors only, as text, so that what they print on stderr for a person
// (ask's tool calls) reads cleanly.
func newLogger(w io.Writer, cfg *config.Config, oneShot bool) *slog.Logger {
	level, format := cfg.LogLevel, cfg.LogFormat
	if oneShot && !cfg.LogLevelSet {
		level = slog.LevelWarn
	}
	if !cfg.LogFormatSet && (oneShot || isTerminal(w)) {
		format = "text"
	}
	opts := &slog.HandlerOptions{Level: level}
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// Run carries out the command.
func (m *Main) Run(ctx context.Context) error {
	switch m.Command {
	case "serve":
		return m.runServe(ctx)
	case "keys":
		return m.runKeys(ctx)
	case "users":
		return m.runUsers(ctx)
	case "sources":
		return m.runSources(ctx)
	case "audit":
		return m.runAudit(ctx)
	case "dictionary":
		return m.runDictionary(ctx)
	case "migrate":
		return m.runMigrate(ctx)
	case "sql":
		return m.runSQL(ctx)
	case "ask":
		return m.runAsk(ctx)
	case "mcp":
		return m.runMCP(ctx)
	case "eval":
		return m.runEval(ctx)
	case "version":
		return m.runVersion()
	}
	return fmt.Errorf("unknown command %q", m.Command)
}

// Close stops the server, waiting up to shutdownGrace for requests in flight,
// then closes everything Run opened, in reverse order.
func (m *Main) Close() error {
	return m.CloseWithin(context.Background())
}

// CloseWithin is Close with a grace that also ends when grace does (serve's
// second signal), not only after shutdownGrace.
func (m *Main) CloseWithin(grace context.Context) error {
	var errs []error
	if m.Server != nil {
		// Running turns get the grace to finish; the server then stores the
		// rest as interrupted, which takes a moment more.
		deadline := time.Now().Add(m.shutdownGrace())
		ctx, cancel := context.WithDeadline(grace, deadline)
		errs = append(errs, m.Server.Shutdown(ctx))
		cancel()
		if m.served != nil {
			errs = append(errs, <-m.served)
		}
		// The turns' ends the store did not take yet (its database away
		// when they ended) get a last try before the store closes, so
		// their text and usage are not lost with the process: within what
		// is left of the grace, and at least lastRepairTry for those the
		// turns interrupted as it ran out; a second signal ends it.
		if r := m.Server.Chat; r != nil {
			ctx, cancel := context.WithTimeout(grace, max(time.Until(deadline), lastRepairTry))
			if n := r.SaveRepairs(ctx); n > 0 {
				errs = append(errs, fmt.Errorf("%d answers' ends not saved: the database did not take them before the server stopped", n))
			}
			cancel()
		}
	}
	for i := len(m.closers) - 1; i >= 0; i-- {
		errs = append(errs, m.closers[i]())
	}
	m.closers = nil
	return errors.Join(errs...)
}

// Addr returns the address serve listens on (useful with port 0).
func (m *Main) Addr() string {
	if m.listener == nil {
		return ""
	}
	return m.listener.Addr().String()
}

// migrator is what the stores offer besides datachat.Store.
type migrator interface {
	datachat.Store
	PendingMigrations(ctx context.Context) ([]string, error)
	Migrate(ctx context.Context) error
}

// openStore says which data directory and database the command uses, opens
// the database and applies pending migrations (their names in m.migrated).
func (m *Main) openStore(ctx context.Context) (datachat.Store, error) {
	cfg := m.Config
	if err := m.checkLegacyDataDir(); err != nil {
		return nil, err
	}
	m.announceData()
	var (
		st  migrator
		err error
	)
	if config.IsPostgres(cfg.DatabaseURL) {
		if st, err = postgres.Open(ctx, cfg.DatabaseURL); err != nil {
			return nil, fmt.Errorf("DATACHAT_DATABASE_URL: %w", err)
		}
	} else {
		if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
			return nil, fmt.Errorf("DATACHAT_DATA_DIR: %w", err)
		}
		if st, err = sqlite.Open(ctx, filepath.Join(cfg.DataDir, "datachat.db")); err != nil {
			return nil, err
		}
	}
	pending, err := st.PendingMigrations(ctx)
	if err == nil && len(pending) > 0 {
		if err = st.Migrate(ctx); err == nil {
			m.migrated = pending
			m.Logger.Info("migrations applied", slog.Any("migrations", pending))
		}
	}
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("migrate database: %w", err)
	}
	m.Store = st
	m.closers = append(m.closers, st.Close)
	return st, nil
}

// announceData says where the command's data is: for serve in its log, for
// the other commands in a line on stderr (stdout carries their output).
func (m *Main) announceData() {
	cfg := m.Config
	from := "default"
	if cfg.DataDirSet {
		from = "DATACHAT_DATA_DIR"
	}
	db := filepath.Join(cfg.DataDir, "datachat.db") + " (SQLite)"
	if config.IsPostgres(cfg.DatabaseURL) {
		db = redactURL(cfg.DatabaseURL) + " (PostgreSQL, DATACHAT_DATABASE_URL)"
	}
	if m.Command == "serve" {
		m.Logger.Info("data", slog.String("data_dir", cfg.DataDir), slog.String("data_dir_from", from), slog.String("database", db))
		return
	}
	fmt.Fprintf(m.Stderr, "datachat: data directory %s (%s); database %s\n", cfg.DataDir, from, db)
}

// legacyDataDir is where datachat kept its data before its default was a
// fixed place per user: datachat-data in the working directory.
const legacyDataDir = "datachat-data"

// checkLegacyDataDir stops a command that would start afresh in the default
// data directory, which does not exist yet, while the working directory
// holds datachat-data, the data of an earlier datachat: the user chooses to
// move it, keep it, or start afresh. Going on with a warning instead would
// create the default directory, after which the data would be ignored for
// good without a word (and "mv datachat-data DEFAULT" would put it inside).
func (m *Main) checkLegacyDataDir() error {
	cfg := m.Config
	if cfg.DataDirSet {
		return nil
	}
	if _, err := os.Stat(cfg.DataDir); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	old, err := filepath.Abs(legacyDataDir)
	if err != nil {
		return nil
	}
	if fi, err := os.Stat(old); err != nil || !fi.IsDir() {
		return nil
	}
	q := shellQuote
	return fmt.Errorf(`%s holds the data of an earlier datachat, which kept its data in the directory it ran in. datachat now keeps it in one place, whatever the directory: %s, which does not exist yet. Nothing was changed. Either move the old data there:

  mkdir -p %s && mv %s %s

or keep it where it is (set this wherever datachat runs):

  export DATACHAT_DATA_DIR=%s

or start afresh and leave it alone:

  mkdir -p -m 700 %s`,
		old, cfg.DataDir, q(filepath.Dir(cfg.DataDir)), q(old), q(cfg.DataDir), q(old), q(cfg.DataDir))
}

// shellQuote quotes s for a POSIX shell when it needs quoting.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./+:@%,=") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func (m *Main) runServe(ctx context.Context) error {
	if dir := m.Config.ProfileDir; dir != "" {
		stop, err := startProfile(dir, m.Config.ProfileTrace)
		if err != nil {
			return err
		}
		m.closers = append(m.closers, stop) // the first closer runs last: the profiles cover the shutdown
		m.Logger.Warn("profiling: serve is slower until it stops", slog.String("dir", dir))
	}
	st, err := m.openStore(ctx)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", m.Config.Addr)
	if err != nil {
		return fmt.Errorf("DATACHAT_ADDR: %w", err)
	}
	m.listener = ln
	// Messages left streaming by a process that is gone become interrupted;
	// those another live process streams (same database) are left alone.
	owner, node := leaseIdentity(ln)
	if n, err := st.InterruptStreaming(ctx, time.Now(), owner, node); err != nil {
		ln.Close()
		return err
	} else if n > 0 {
		m.Logger.Warn("messages left streaming by the last run marked interrupted", slog.Int("count", n))
	}
	ws, err := m.newWorkspace(st, m.Config.DataDir, m.Config.Retrieval)
	if err != nil {
		ln.Close()
		return err
	}
	// A worker started now says which OS limits contain DuckDB here, and
	// proves workers start at all before the first query needs one.
	limits, err := ws.Engine.Limits(ctx)
	if err != nil {
		ln.Close()
		return fmt.Errorf("the SQL engine's worker process does not start: %w", err)
	}
	o := ws.Engine.Options()
	m.Logger.Info("sql workers", slog.Int("queries_at_once", o.Workers), slog.Int("per_user", o.PerUserRunning),
		slog.String("memory_per_query", duckdb.SizeText(o.MemoryLimit)), slog.Duration("timeout", o.Timeout),
		slog.Any("os_limits", limits))
	// PDFium is compiled into the data directory's cache in the background
	// the first time, so that the first PDF upload reads it back at once.
	ws.Extractor.Warm()
	// What a burst grew the heap to goes back to the system once it is over.
	m.closers = append(m.closers, trimMemory())
	runner, err := m.newRunner(st, ws)
	if err != nil {
		ln.Close()
		return err
	}
	if err := m.applySourceConfig(ctx, st); err != nil {
		ln.Close()
		return err
	}
	sources := m.newSources(st)
	runner.Sources = sources
	runner.LeaseOwner, runner.LeaseNode = owner, node
	m.closers = append(m.closers, m.sweepLeftStreaming(st, owner, node))
	if err := m.pruneAudit(ctx, st); err != nil {
		m.Logger.Warn("audit log", slog.String("error", err.Error()))
	}
	m.closers = append(m.closers, m.sweepAudit(st))
	met := metrics.New()
	runner.Observer = met.Chat()
	m.Server = server.New(server.Deps{
		Store: st, Logger: m.Logger, Workspace: ws, Chat: runner, Sources: sources, Metrics: met,
	}, server.Config{
		AllowedMetadataKeys: m.Config.AllowedMetadataKeys,
		MaxDocumentBytes:    m.Config.MaxDocumentBytes,
		MaxDatasetBytes:     m.Config.MaxDatasetBytes,
		BodyReadTimeout:     m.Config.BodyReadTimeout,
		BodyMinBytes:        m.Config.BodyMinBytes,
		MaxConnections:      m.Config.MaxConnections,
		MaxWSPerUser:        m.Config.MaxWSPerUser,
		WSPingInterval:      m.Config.WSPingInterval,
		WSPingTimeout:       m.Config.WSPingTimeout,
		WSOutboxBytes:       m.Config.WSOutboxBytes,
		WSWriteTimeout:      m.Config.WriteTimeout,
		AuthCheckInterval:   m.Config.AuthCheckInterval,
		SQLPerMinute:        m.Config.SQLRPM,
		SearchPerMinute:     m.Config.SearchRPM,
		UploadsPerHour:      m.Config.UploadsPerHour,
		SessionIdle:         m.Config.SessionIdle,
		PublicURL:           m.Config.PublicURL,
		SignInPerUser:       signInLimit(m.Config.SignInPerUser),
		SignInPerAddress:    signInLimit(m.Config.SignInPerAddress),
	})
	// A user's own token budget (set by an admin) overrides the server's.
	runner.UserTokensPerDay = func(ctx context.Context, userID string) (*int64, error) {
		a, err := st.Account(ctx, userID)
		if err != nil {
			return nil, err
		}
		return a.TokensPerDay, nil
	}
	if o := m.Config.OIDC; o.Issuer != "" {
		// The sign-in flow's cookie is sealed with a key derived from the
		// server's (made in the data directory on first use, as sources'
		// is).
		sec, err := m.loadSecrets(true)
		if err != nil {
			ln.Close()
			return fmt.Errorf("single sign-on: %w", err)
		}
		err = m.Server.EnableSSO(sso.Config{
			Issuer: o.Issuer, ClientID: o.ClientID, ClientSecret: o.ClientSecret, PublicURL: m.Config.PublicURL,
			AllowedDomains: o.AllowedDomains, AdminGroup: o.AdminGroup, GroupsClaim: o.GroupsClaim,
			Key: sec.DeriveKey("datachat single sign-on"), Logger: m.Logger,
		})
		if err != nil {
			ln.Close()
			return fmt.Errorf("single sign-on: %w", err)
		}
	}
	if err := m.firstUser(ctx, st); err != nil {
		ln.Close()
		return err
	}
	m.served = make(chan error, 1)
	go func() { m.served <- m.Server.Serve(ln) }()
	m.Logger.Info("serving", slog.String("addr", m.Addr()))
	return nil
}

// signInLimit is a DATACHAT_SIGNIN_PER_* value as server.Config takes it:
// 0 (no limit) is negative there, where zero is the default.
func signInLimit(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// signInURL is the page's address that signs in with key: at
// DATACHAT_PUBLIC_URL when it is set, else at addr (serve's listen address;
// one on every interface is reached on 127.0.0.1). The key rides in the
// fragment, so it never reaches a log.
func (m *Main) signInURL(addr, key string) string {
	if u := m.Config.PublicURL; u != "" {
		return strings.TrimRight(u, "/") + "/#key=" + key
	}
	if h, port, err := net.SplitHostPort(addr); err == nil && (h == "" || h == "0.0.0.0" || h == "::") {
		addr = net.JoinHostPort("127.0.0.1", port)
	}
	return "http://" + addr + "/#key=" + key
}

func (m *Main) runMigrate(ctx context.Context) error {
	if _, err := m.openStore(ctx); err != nil {
		return err
	}
	if len(m.migrated) > 0 {
		fmt.Fprintf(m.Stderr, "applied migrations %s; ", strings.Join(m.migrated, ", "))
	}
	fmt.Fprintln(m.Stderr, "database schema is current")
	return nil
}
