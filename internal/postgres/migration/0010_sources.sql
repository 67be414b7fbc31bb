-- Database sources the operator added (datachat sources add, or
-- DATACHAT_SOURCES in the --config file), and the conversations they are
-- attached to. sealed_url is sealed with the server's key
-- (internal/dbsource): the credentials are never stored in the clear.
-- Removing a source detaches it everywhere.
CREATE TABLE db_sources (
	name       text PRIMARY KEY,
	kind       text NOT NULL CHECK (kind IN ('postgres', 'mysql')),
	sealed_url text NOT NULL,
	tables     jsonb NOT NULL DEFAULT '[]',
	users      jsonb NOT NULL DEFAULT '[]',
	all_users  boolean NOT NULL DEFAULT false,
	origin     text NOT NULL DEFAULT 'cli' CHECK (origin IN ('cli', 'config')),
	created_at timestamptz NOT NULL
);

CREATE TABLE conversation_db_sources (
	conversation_id text NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
	source_name     text NOT NULL REFERENCES db_sources (name) ON DELETE CASCADE,
	row_seq         bigint GENERATED ALWAYS AS IDENTITY,
	created_at      timestamptz NOT NULL,
	PRIMARY KEY (conversation_id, source_name)
);
CREATE INDEX conversation_db_sources_source_name ON conversation_db_sources (source_name);
