package workspace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"datachat"
	"datachat/internal/dbsource"
)

// SourceStore is the part of [datachat.Store] that [Sources] use: the
// sources, their attachments, the conversations they are attached to, and
// the audit log every query is recorded in. Each method is as
// datachat.Store documents it, and every datachat.Store is one.
type SourceStore interface {
	Conversation(ctx context.Context, userID, id string) (*datachat.Conversation, error)
	DBSource(ctx context.Context, name string) (*datachat.DBSource, error)
	DBSources(ctx context.Context) ([]*datachat.DBSource, error)
	AttachDBSource(ctx context.Context, conversationID, name string) error
	DetachDBSource(ctx context.Context, conversationID, name string) error
	ConversationDBSources(ctx context.Context, conversationID string) ([]*datachat.DBSource, error)
	AppendAudit(ctx context.Context, e *datachat.AuditEvent) error
	SemanticLayer(ctx context.Context, conversationID string) (*datachat.SemanticLayer, error)
}

var _ SourceStore = datachat.Store(nil)

// Sources are the server's database sources, each granted to named users or
// to all, as users and their conversations use them. The store is the one
// record of what exists and whom it is granted to: every use reads the
// source's definition there, so a source removed or changed with `datachat
// sources` while serve runs is refused, or reopened, on its next use. Each
// source's connections are a pool (dbsource.DB) opened on first use and kept
// for the process, its role proved again every ProofInterval; a pool whose
// source is gone or changed is closed when the user lists sources or a turn
// describes them, and every pool when the process stops.
//
// A source not granted to the user answers ENOTFOUND, as an unknown one does,
// so the names of other users' sources do not leak. Credentials never leave
// the store sealed; they are opened only to connect.
type Sources struct {
	Store SourceStore
	// SecretKey is DATACHAT_SECRET_KEY; without it the key file in DataDir
	// (dbsource.LoadSecrets), read when a source is first opened.
	SecretKey string
	DataDir   string
	Options   dbsource.Options
	Logger    *slog.Logger
	// CatalogTTL is how long a source's tables, as the prompt lists them,
	// are reused before they are read again (default 1 minute).
	CatalogTTL time.Duration
	// ProofInterval is how often an open source's role is proved again
	// while no query runs (dbsource.DB.Watch; default 1 minute).
	ProofInterval time.Duration

	mu      sync.Mutex
	secrets *dbsource.Secrets
	open    map[string]*openSource
	closing sync.WaitGroup // pools closing in the background
	closed  bool
}

// openSource is a source's pool and what it was opened from.
type openSource struct {
	def       *datachat.DBSource
	db        *dbsource.DB
	stopWatch context.CancelFunc // ends the pool's periodic role proof

	mu      sync.Mutex // the cached description
	readAt  time.Time
	dialect string
	tables  []dbsource.Table
}

// errNoSource is the answer for a source that does not exist or is not the
// user's: the same, so that others' source names do not leak.
func errNoSource(name string) error {
	return datachat.Errorf(datachat.ENOTFOUND, "No database source named %q.", name)
}

// Granted lists the sources the user may attach, by name. It also closes the
// pools of sources that are gone from the store.
func (s *Sources) Granted(ctx context.Context, user *datachat.User) ([]*datachat.DBSource, error) {
	all, err := s.Store.DBSources(ctx)
	if err != nil {
		return nil, err
	}
	s.prune(all)
	out := []*datachat.DBSource{}
	for _, src := range all {
		if src.Allows(user.Name) {
			out = append(out, src)
		}
	}
	return out, nil
}

// Attached lists the sources attached to the user's conversation that the
// user may still use (a source whose grant was taken away stays attached,
// unused, until the grant comes back or it is detached); ENOTFOUND if the
// conversation is not the user's.
func (s *Sources) Attached(ctx context.Context, user *datachat.User, conversationID string) ([]*datachat.DBSource, error) {
	if _, err := s.Store.Conversation(ctx, user.ID, conversationID); err != nil {
		return nil, err
	}
	return s.attached(ctx, user, conversationID)
}

func (s *Sources) attached(ctx context.Context, user *datachat.User, conversationID string) ([]*datachat.DBSource, error) {
	list, err := s.Store.ConversationDBSources(ctx, conversationID)
	if err != nil {
		return nil, err
	}
	out := []*datachat.DBSource{}
	for _, src := range list {
		if src.Allows(user.Name) {
			out = append(out, src)
		}
	}
	return out, nil
}

// Attach attaches a source granted to the user to the user's conversation
// and returns it; ENOTFOUND for a conversation or source that is not the
// user's.
func (s *Sources) Attach(ctx context.Context, user *datachat.User, conversationID, name string) (*datachat.DBSource, error) {
	if _, err := s.Store.Conversation(ctx, user.ID, conversationID); err != nil {
		return nil, err
	}
	src, err := s.Store.DBSource(ctx, name)
	if datachat.ErrorCode(err) == datachat.ENOTFOUND || err == nil && !src.Allows(user.Name) {
		return nil, errNoSource(name)
	}
	if err != nil {
		return nil, err
	}
	if err := s.Store.AttachDBSource(ctx, conversationID, name); err != nil {
		if datachat.ErrorCode(err) == datachat.ENOTFOUND { // removed meanwhile
			return nil, errNoSource(name)
		}
		return nil, err
	}
	s.Logger.Info("database source attached", slog.String("conversation_id", conversationID), slog.String("source", name))
	return src, nil
}

// Detach detaches a source from the user's conversation; ENOTFOUND if the
// conversation is not the user's or the source is not attached to it.
func (s *Sources) Detach(ctx context.Context, user *datachat.User, conversationID, name string) error {
	if _, err := s.Store.Conversation(ctx, user.ID, conversationID); err != nil {
		return err
	}
	if err := s.Store.DetachDBSource(ctx, conversationID, name); err != nil {
		if datachat.ErrorCode(err) == datachat.ENOTFOUND {
			return datachat.Errorf(datachat.ENOTFOUND, "No database source named %q is attached to this conversation.", name)
		}
		return err
	}
	return nil
}

// usable returns the pool of a source attached to the user's conversation
// and granted to the user; ENOTFOUND otherwise.
func (s *Sources) usable(ctx context.Context, user *datachat.User, conversationID, name string) (*openSource, error) {
	if _, err := s.Store.Conversation(ctx, user.ID, conversationID); err != nil {
		return nil, err
	}
	list, err := s.attached(ctx, user, conversationID)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(list, func(src *datachat.DBSource) bool { return src.Name == name })
	if i < 0 {
		return nil, datachat.Errorf(datachat.ENOTFOUND, "No database source named %q is attached to this conversation.", name)
	}
	return s.pool(list[i])
}

// Query runs one statement on a source attached to the user's conversation
// ([datachat.DBSourceService]): at most Options.MaxRows rows, in the source's sandbox.
// Errors: EINVALID with the engine's message for a query to correct,
// ENOTFOUND for a source not attached or not granted, EBUSY for a source
// that does not answer.
//
// Every call is recorded in the audit log, whatever its outcome (see
// [Sources.audit]): this is the one place a statement of anyone's reaches a
// database source, whether from a chat turn (the WebSocket, POST
// /chat/query, /v1) or from MCP (/mcp, datachat mcp). The log is written
// before the result is returned, and a result whose record cannot be
// written is withheld: EBUSY, naming the audit log.
func (s *Sources) Query(ctx context.Context, user *datachat.User, conversationID, name, sql string) (*datachat.QueryResult, error) {
	start := time.Now()
	r, err := s.query(ctx, user, conversationID, name, sql)
	if aerr := s.audit(ctx, user, conversationID, name, sql, r, err, time.Since(start)); aerr != nil {
		return nil, aerr
	}
	return r, err
}

func (s *Sources) query(ctx context.Context, user *datachat.User, conversationID, name, sql string) (*datachat.QueryResult, error) {
	o, err := s.usable(ctx, user, conversationID, name)
	if err != nil {
		return nil, err
	}
	r, err := o.db.Query(ctx, sql)
	if err != nil {
		return nil, s.queryError(ctx, name, err)
	}
	return r, nil
}

// Stream runs one statement on a source attached to the user's
// conversation as Query does, handing its rows to sink as they arrive, at
// most maxRows ([datachat.DBSourceService]): execute_sql's save_as. It is
// recorded in the audit log as Query is, with the rows it gave; the record
// is written before Stream returns, and when it cannot be the call fails
// (EBUSY), so that the caller throws away what sink got: no record, no
// saved table.
func (s *Sources) Stream(ctx context.Context, user *datachat.User, conversationID, name, sql string, maxRows int, sink datachat.RowSink) (datachat.StreamResult, error) {
	start := time.Now()
	res, err := s.stream(ctx, user, conversationID, name, sql, maxRows, sink)
	var r *datachat.QueryResult
	if err == nil {
		r = &datachat.QueryResult{RowCount: int(res.Rows), Truncated: res.Truncated}
	}
	if aerr := s.audit(ctx, user, conversationID, name, sql, r, err, time.Since(start)); aerr != nil {
		return datachat.StreamResult{}, aerr
	}
	return res, err
}

func (s *Sources) stream(ctx context.Context, user *datachat.User, conversationID, name, sql string, maxRows int, sink datachat.RowSink) (datachat.StreamResult, error) {
	o, err := s.usable(ctx, user, conversationID, name)
	if err != nil {
		return datachat.StreamResult{}, err
	}
	sk := &sinkErr{sink: sink}
	res, err := o.db.Stream(ctx, sql, maxRows, sk)
	if err != nil {
		if sk.err != nil && errors.Is(err, sk.err) {
			return datachat.StreamResult{}, err // the sink's own: the caller's to say
		}
		return datachat.StreamResult{}, s.queryError(ctx, name, err)
	}
	return res, nil
}

// sinkErr remembers the error a sink returned, to tell it from the
// source's.
type sinkErr struct {
	sink datachat.RowSink
	err  error
}

func (k *sinkErr) Columns(cols []datachat.Column) error {
	k.err = k.sink.Columns(cols)
	return k.err
}

func (k *sinkErr) Row(values []any) error {
	k.err = k.sink.Row(values)
	return k.err
}

// auditWait bounds how long a query's record may take to write. It is
// written even when the query's context ended (the user stopped it), so
// that a cancelled query is recorded too.
const auditWait = 10 * time.Second

// audit records one query on a source in the audit log: who (the user, and
// the address and request id the context carries, datachat.AuditOrigin),
// where (conversation, source), what (the SQL) and how it ended — ok with
// its row count, refused (by the sandbox, a role that could escape
// read-only, or a source not attached or not granted) or failed (anything
// else), with the message its caller got — and how long it took. When the
// record cannot be written it logs the event and returns the error the
// caller gets instead of the result: fail closed, since a result no record
// accounts for must not reach anyone.
func (s *Sources) audit(ctx context.Context, user *datachat.User, conversationID, name, sql string, r *datachat.QueryResult, qerr error, d time.Duration) error {
	addr, reqID := datachat.AuditOrigin(ctx)
	e := &datachat.AuditEvent{
		Kind: datachat.AuditSourceQuery, Outcome: queryOutcome(qerr),
		UserID: user.ID, UserName: user.Name, Address: addr, RequestID: reqID,
		ConversationID: conversationID, Source: name, SQL: sql,
		DurationMS: float64(d.Microseconds()) / 1000, Error: queryErrorText(ctx, qerr),
	}
	if qerr == nil {
		n := int64(r.RowCount)
		e.RowCount = &n
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), auditWait)
	defer cancel()
	err := s.Store.AppendAudit(actx, e)
	if err == nil {
		return nil
	}
	s.Logger.Error("audit log: a query on a database source could not be recorded; its result was withheld",
		slog.String("user", user.Name), slog.String("conversation_id", conversationID), slog.String("source", name),
		slog.String("outcome", e.Outcome), slog.String("request_id", reqID), slog.String("error", err.Error()))
	return datachat.WrapError(datachat.EBUSY, fmt.Sprintf("The query on %s was not answered: every query on a database source is recorded in the audit log, and its record could not be written. Try again in a few seconds; if it goes on, tell the server's administrator.", name), err)
}

// queryOutcome is how a query ended, for its audit record.
func queryOutcome(err error) string {
	var qe *datachat.QueryError
	var re *dbsource.RoleError
	switch {
	case err == nil:
		return datachat.AuditOK
	case errors.As(err, &qe) && qe.Kind == datachat.KindRefused, errors.As(err, &re),
		datachat.ErrorCode(err) == datachat.ENOTFOUND:
		return datachat.AuditRefused
	}
	return datachat.AuditFailed
}

// queryErrorText is what a query's audit record says of its error: what
// its caller was told, or why it ended when that was nothing to tell.
func queryErrorText(ctx context.Context, err error) string {
	switch {
	case err == nil:
		return ""
	case ctx.Err() != nil:
		return "stopped before it finished: " + context.Cause(ctx).Error()
	case datachat.ErrorCode(err) == datachat.EINTERNAL:
		return "internal error: the server's log has the detail"
	}
	return datachat.ErrorMessage(err)
}

// EstimateRows is the source's EXPLAIN estimate of the rows sql would
// return ([datachat.DBSourceService]), with Query's errors.
func (s *Sources) EstimateRows(ctx context.Context, user *datachat.User, conversationID, name, sql string) (int64, error) {
	o, err := s.usable(ctx, user, conversationID, name)
	if err != nil {
		return 0, err
	}
	n, err := o.db.EstimateRows(ctx, sql)
	if err != nil {
		return 0, s.queryError(ctx, name, err)
	}
	return n, nil
}

// queryError passes a query's own errors (EINVALID: a *datachat.QueryError,
// or a role refused) and the context's; anything else is the source not
// answering: logged, and EBUSY for the caller.
func (s *Sources) queryError(ctx context.Context, name string, err error) error {
	if ctx.Err() != nil || datachat.ErrorCode(err) == datachat.EINVALID {
		return err
	}
	s.Logger.Warn("database source failed", slog.String("source", name), slog.String("error", err.Error()))
	return datachat.WrapError(datachat.EBUSY, fmt.Sprintf("The database %s does not answer right now; try again later.", name), err)
}

// Describe lists the conversation's sources for the system prompt
// ([datachat.DBSourceService]): each one's dialect and allowed tables, read from the source
// at most once every CatalogTTL, with what the conversation's data
// dictionary says of them (descriptions and semantic layer). A source that
// cannot be read now is listed as unavailable, with why.
func (s *Sources) Describe(ctx context.Context, user *datachat.User, conversationID string) ([]datachat.DBSourceInfo, error) {
	list, err := s.attached(ctx, user, conversationID)
	if err != nil {
		return nil, err
	}
	if len(list) > 0 { // a turn on sources: close the pools of those removed meanwhile
		all, err := s.Store.DBSources(ctx)
		if err != nil {
			return nil, err
		}
		s.prune(all)
	}
	var layer *datachat.SemanticLayer
	if len(list) > 0 {
		if layer, err = s.Store.SemanticLayer(ctx, conversationID); err != nil {
			return nil, err
		}
	}
	out := make([]datachat.DBSourceInfo, 0, len(list))
	for _, src := range list {
		info := datachat.DBSourceInfo{Name: src.Name, Kind: src.Kind}
		o, err := s.pool(src)
		if err == nil {
			info.Dialect, info.Tables, err = s.describe(ctx, o)
			layer.Describe(src.Name, info.Tables)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			s.Logger.Warn("database source: read its tables", slog.String("source", src.Name), slog.String("error", err.Error()))
			info.Unavailable = "it does not answer; tell the user, who may try again later"
			if datachat.ErrorCode(err) == datachat.EINVALID {
				info.Unavailable = datachat.ErrorMessage(err)
			}
		}
		out = append(out, info)
	}
	return out, nil
}

func (s *Sources) describe(ctx context.Context, o *openSource) (string, []datachat.DBSourceTable, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	ttl := s.CatalogTTL
	if ttl <= 0 {
		ttl = time.Minute
	}
	if o.readAt.IsZero() || time.Since(o.readAt) > ttl {
		dialect, err := o.db.Dialect(ctx)
		if err != nil {
			return "", nil, err
		}
		tables, err := o.db.Catalog(ctx)
		if err != nil {
			return "", nil, err
		}
		o.dialect, o.tables, o.readAt = dialect, tables, time.Now()
	}
	tables := make([]datachat.DBSourceTable, len(o.tables))
	for i, t := range o.tables {
		tables[i] = datachat.DBSourceTable{Name: t.QualifiedName(o.def.Kind), View: t.View, Rows: t.Rows, Columns: t.Columns}
		for _, fk := range t.ForeignKeys {
			tables[i].ForeignKeys = append(tables[i].ForeignKeys, datachat.ForeignKey{
				Columns: fk.Columns, RefTable: dbsource.Table{Schema: fk.RefSchema, Name: fk.RefName}.QualifiedName(o.def.Kind), RefColumns: fk.RefColumns})
		}
	}
	return o.dialect, tables, nil
}

// pool returns the open pool of a source as the store defines it now,
// opening it (or reopening it, when its definition changed) as needed.
func (s *Sources) pool(def *datachat.DBSource) (*openSource, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, datachat.Errorf(datachat.EBUSY, "The server is shutting down.")
	}
	if o := s.open[def.Name]; o != nil {
		if sameSource(o.def, def) {
			return o, nil
		}
		s.closeLocked(def.Name)
	}
	if s.secrets == nil {
		sec, _, err := dbsource.LoadSecrets(s.SecretKey, s.DataDir)
		if err != nil {
			return nil, s.keyError(def.Name, err)
		}
		s.secrets = sec
	}
	url, err := s.secrets.Open(def.SealedURL)
	if err != nil {
		return nil, s.keyError(def.Name, err)
	}
	src := dbsource.Source{Name: def.Name, URL: url, Tables: slices.Clone(def.Tables), AllUsers: def.AllUsers}
	if len(def.Users) > 0 {
		src.Users = slices.Clone(def.Users)
	}
	db, err := dbsource.Open(src, s.Options)
	if err != nil {
		return nil, fmt.Errorf("database source %s: %w", def.Name, err)
	}
	if s.open == nil {
		s.open = map[string]*openSource{}
	}
	every := s.ProofInterval
	if every <= 0 {
		every = time.Minute
	}
	wctx, stop := context.WithCancel(context.Background())
	o := &openSource{def: def, db: db, stopWatch: stop}
	s.open[def.Name] = o
	s.closing.Go(func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		db.Watch(wctx, tick.C, s.Logger)
	})
	return o, nil
}

// keyError is a source whose credentials the server's key does not open
// (the key changed, or its file is unreadable): logged with the cause, and
// EINVALID for the caller, saying what the operator must do. The cause names
// no secret.
func (s *Sources) keyError(name string, err error) error {
	s.Logger.Error("database source: its credentials cannot be opened", slog.String("source", name), slog.String("error", err.Error()))
	return datachat.WrapError(datachat.EINVALID, fmt.Sprintf("The database %s cannot be opened: the server's secret key (DATACHAT_SECRET_KEY or secret.key in the data directory) does not open its stored credentials; the operator must restore the key the source was added with, or add the source again (datachat sources add %s).", name, name), err)
}

// sameSource reports whether two definitions open the same pool.
func sameSource(a, b *datachat.DBSource) bool {
	return a.SealedURL == b.SealedURL && a.Kind == b.Kind && slices.Equal(a.Tables, b.Tables)
}

// prune closes the pools of sources that are gone from the store (all) or
// were redefined.
func (s *Sources) prune(all []*datachat.DBSource) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, o := range s.open {
		i := slices.IndexFunc(all, func(src *datachat.DBSource) bool { return src.Name == name })
		if i < 0 || !sameSource(o.def, all[i]) {
			s.closeLocked(name)
		}
	}
}

// closeLocked closes a pool in the background: closing waits for the
// queries running on it, which end within the query timeout.
func (s *Sources) closeLocked(name string) {
	o := s.open[name]
	if o == nil {
		return
	}
	delete(s.open, name)
	o.stopWatch()
	s.closing.Go(o.db.Close)
}

// Close closes every pool, waiting for the queries running on them.
func (s *Sources) Close() error {
	s.mu.Lock()
	s.closed = true
	for name := range s.open {
		s.closeLocked(name)
	}
	s.mu.Unlock()
	s.closing.Wait()
	return nil
}

// Open reports the names of the sources whose pools are open, for tests.
func (s *Sources) Open() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var names []string
	for name := range s.open {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

var _ datachat.DBSourceService = (*Sources)(nil)

// ResolveDictionary checks the sources' part of a dictionary change against
// the catalogs of the sources attached to the user's conversation
// ([datachat.Dictionary.ResolveSources]) and returns it resolved, ready for
// Store.UpdateDictionary; a change without sources comes back as it is.
// EINVALID naming what does not fit; ENOTFOUND for a conversation that is
// not the user's.
func (s *Sources) ResolveDictionary(ctx context.Context, user *datachat.User, conversationID string, d datachat.Dictionary) (datachat.Dictionary, error) {
	if len(d.Sources) == 0 {
		return d, nil
	}
	if _, err := s.Store.Conversation(ctx, user.ID, conversationID); err != nil {
		return d, err
	}
	infos, err := s.Describe(ctx, user, conversationID)
	if err != nil {
		return d, err
	}
	return d.ResolveSources(infos)
}
