-- The retrieval index's first schema, as Open created it before it had
-- migrations: every statement is IF NOT EXISTS, so that an index file of that
-- time (these tables, no schema_migrations) keeps its tables and rows.
CREATE TABLE IF NOT EXISTS documents (
	conversation_id TEXT NOT NULL,
	id              TEXT NOT NULL,
	name            TEXT NOT NULL,
	media_type      TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (conversation_id, id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS document_metadata (
	conversation_id TEXT NOT NULL,
	document_id     TEXT NOT NULL,
	key             TEXT NOT NULL,
	value           TEXT NOT NULL,
	PRIMARY KEY (conversation_id, document_id, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS chunks (
	rowid           INTEGER PRIMARY KEY,
	conversation_id TEXT NOT NULL,
	document_id     TEXT NOT NULL,
	id              TEXT NOT NULL,
	seq             INTEGER NOT NULL,
	page            INTEGER NOT NULL DEFAULT 0,
	heading         TEXT NOT NULL DEFAULT '',
	start_offset    INTEGER NOT NULL DEFAULT 0,
	end_offset      INTEGER NOT NULL DEFAULT 0,
	text            TEXT NOT NULL,
	vector          BLOB
);
CREATE INDEX IF NOT EXISTS chunks_document ON chunks (conversation_id, document_id);
PRAGMA user_version = 1;
