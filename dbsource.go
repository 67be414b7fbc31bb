package datachat

import (
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
