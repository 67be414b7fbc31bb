-- Database sources the operator added (datachat sources add, or
-- DATACHAT_SOURCES in the --config file), and the conversations they are
-- attached to. url is sealed with the server's key (internal/dbsource): the
-- credentials are never stored in the clear. tables and users are JSON arrays
-- of strings. Removing a source detaches it everywhere.
CREATE TABLE db_sources (
	name       TEXT PRIMARY KEY,
	kind       TEXT NOT NULL CHECK (kind IN ('postgres', 'mysql')),
	sealed_url TEXT NOT NULL,
	tables     TEXT NOT NULL DEFAULT '[]',
	users      TEXT NOT NULL DEFAULT '[]',
	all_users  INTEGER NOT NULL DEFAULT 0,
	origin     TEXT NOT NULL DEFAULT 'cli' CHECK (origin IN ('cli', 'config')),
	created_at TEXT NOT NULL
);

CREATE TABLE conversation_db_sources (
	conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
	source_name     TEXT NOT NULL REFERENCES db_sources (name) ON DELETE CASCADE,
	created_at      TEXT NOT NULL,
	PRIMARY KEY (conversation_id, source_name)
);
CREATE INDEX conversation_db_sources_source_name ON conversation_db_sources (source_name);
