package datachat

import (
	"context"
	"slices"
	"time"
)

// DBSource origins: how a source was added.
const (
	OriginCLI    = "cli"    // datachat sources add
	OriginConfig = "config" // DATACHAT_SOURCES in the --config file, applied by serve
)

// DBSource is a database the operator added as a source (`datachat sources
// add`, or DATACHAT_SOURCES in serve's config file): a PostgreSQL or MySQL/MariaDB database that the users
// it is granted to may attach to their conversations, so that execute_sql
// queries it where the data is. internal/dbsource opens and queries it.
//
// The URL carries the credentials: the store keeps it only sealed with the
// server's key (SealedURL), and it never reaches a client, the model or a log.
type DBSource struct {
	Name      string `json:"name"`
	Kind      string `json:"kind"` // postgres or mysql
	SealedURL string `json:"-"`
	// Tables are the patterns of the tables queries may read (SCHEMA.TABLE,
	// with * and ? wildcards; see dbsource.Source).
	Tables []string `json:"tables"`
	// Users are the names of the users who may attach the source, unless
	// AllUsers.
	Users     []string  `json:"users"`
	AllUsers  bool      `json:"all_users"`
	Origin    string    `json:"origin"` // OriginCLI or OriginConfig
	CreatedAt time.Time `json:"created_at"`
}

// Allows reports whether the user of this name may see, attach and query the
// source.
func (s *DBSource) Allows(userName string) bool {
	return s.AllUsers || slices.Contains(s.Users, userName)
}

// DBSourceService reads the database sources a chat turn (or an MCP client)
// may query: those attached to its conversation and granted to its user, each
// queried where the data is, in its own SQL. internal/workspace implements it.
//
// Errors are *Error: EINVALID for a query the model can correct (the
// engine's own message and hint), ENOTFOUND for a source that is not
// attached to the conversation or not granted to the user, EBUSY for a
// source that does not answer.
type DBSourceService interface {
	// Describe lists the conversation's sources for the system prompt, with
	// their dialect and allowed tables. A source whose catalog cannot be
	// read now is listed with Unavailable set, not failed.
	Describe(ctx context.Context, user *User, conversationID string) ([]DBSourceInfo, error)
	// Query runs one statement on a source, as execute_sql does on the
	// conversation's files: at most 1000 rows, the same result shape.
	Query(ctx context.Context, user *User, conversationID, source, sql string) (*QueryResult, error)
	// EstimateRows returns the source engine's EXPLAIN estimate of the rows a
	// statement would return, without running it.
	EstimateRows(ctx context.Context, user *User, conversationID, source, sql string) (int64, error)
	// Stream runs one statement on a source as Query does — the same checks,
	// the same audit record — but hands its rows to sink as they arrive
	// instead of holding them, at most maxRows of them (more is Truncated):
	// execute_sql's save_as. The audit record is written before Stream
	// returns; when it cannot be, Stream fails (EBUSY) and what sink got must
	// be thrown away. A sink's error ends the query and is returned as is.
	Stream(ctx context.Context, user *User, conversationID, source, sql string, maxRows int, sink RowSink) (StreamResult, error)
}

// RowSink receives a query's rows as they arrive: Columns once, before the
// first row, then Row for each row (values as in [QueryResult.Rows], one per
// column; the slice is not kept by the caller after Row returns).
type RowSink interface {
	Columns(cols []Column) error
	Row(values []any) error
}

// StreamResult is how a streamed query ended: the rows it gave, and whether
// more existed (the row cap was reached, or a value was cut).
type StreamResult struct {
	Rows      int64
	Truncated bool
	ElapsedMS float64
}

// DBSourceInfo is a database source as the system prompt lists it.
type DBSourceInfo struct {
	Name    string
	Kind    string // postgres or mysql
	Dialect string // the engine and its version, e.g. "PostgreSQL 15.14"; "" if unknown
	Tables  []DBSourceTable
	// Unavailable says why the source's tables could not be listed now.
	Unavailable string
}

// DBSourceTable is an allowed table of a source.
type DBSourceTable struct {
	Name    string // SCHEMA.TABLE as the source's SQL writes it, quoted where needed
	View    bool
	Rows    *int64 // the engine's estimate; nil when it has none
	Columns []Column
	// Description is the data dictionary's, when it has one (its columns'
	// are on Columns).
	Description string
	// ForeignKeys are the table's foreign keys to other allowed tables of
	// the source, from the engine's catalog: join hints.
	ForeignKeys []ForeignKey
	// Metrics, Synonyms and Relationships are the data dictionary's
	// semantic layer of the table ([TableSemantics]).
	Metrics       map[string]Metric
	Synonyms      map[string]string
	Relationships []ForeignKey
}

// ForeignKey is a foreign key of a table: its Columns reference RefColumns
// of RefTable (SCHEMA.TABLE as the source's SQL writes it).
type ForeignKey struct {
	Columns    []string `json:"columns" yaml:"columns"`
	RefTable   string   `json:"ref_table" yaml:"ref_table"`
	RefColumns []string `json:"ref_columns" yaml:"ref_columns"`
}
