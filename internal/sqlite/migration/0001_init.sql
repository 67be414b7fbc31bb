-- The initial schema. Timestamps are TEXT in one fixed-width UTC form,
-- 2006-01-02T15:04:05.000000Z, so they sort and compare as strings. JSON
-- columns are TEXT holding the bytes the caller gave. Ordering ties are broken
-- by rowid, the insertion order.

CREATE TABLE users (
	id         TEXT PRIMARY KEY,
	name       TEXT NOT NULL UNIQUE,
	created_at TEXT NOT NULL
);

CREATE TABLE api_keys (
	id           TEXT PRIMARY KEY,
	user_id      TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
	prefix       TEXT NOT NULL DEFAULT '',
	hash         TEXT NOT NULL UNIQUE,
	created_at   TEXT NOT NULL,
	last_used_at TEXT,
	revoked_at   TEXT
);
CREATE INDEX api_keys_user_id ON api_keys (user_id);

CREATE TABLE conversations (
	id         TEXT PRIMARY KEY,
	user_id    TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
	title      TEXT NOT NULL DEFAULT '',
	created_at TEXT NOT NULL,
	updated_at TEXT NOT NULL
);
CREATE INDEX conversations_user_id_updated_at ON conversations (user_id, updated_at);

CREATE TABLE messages (
	id              TEXT PRIMARY KEY,
	conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
	role            TEXT NOT NULL,
	content         TEXT NOT NULL DEFAULT '',
	status          TEXT NOT NULL DEFAULT '',
	input_tokens    INTEGER NOT NULL DEFAULT 0,
	output_tokens   INTEGER NOT NULL DEFAULT 0,
	error           TEXT NOT NULL DEFAULT '',
	created_at      TEXT NOT NULL,
	updated_at      TEXT NOT NULL
);
CREATE INDEX messages_conversation_id_created_at ON messages (conversation_id, created_at);
CREATE INDEX messages_streaming ON messages (status) WHERE status = 'streaming';

CREATE TABLE tool_calls (
	id          TEXT PRIMARY KEY,
	message_id  TEXT NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
	seq         INTEGER NOT NULL DEFAULT 0,
	call_id     TEXT NOT NULL DEFAULT '',
	tool        TEXT NOT NULL,
	args        TEXT,
	ok          INTEGER NOT NULL DEFAULT 0,
	result      TEXT NOT NULL DEFAULT '',
	error       TEXT NOT NULL DEFAULT '',
	started_at  TEXT NOT NULL,
	duration_ms INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX tool_calls_message_id_seq ON tool_calls (message_id, seq);

CREATE TABLE datasets (
	id              TEXT PRIMARY KEY,
	conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
	name            TEXT NOT NULL,
	source          TEXT NOT NULL DEFAULT '',
	format          TEXT NOT NULL DEFAULT '',
	path            TEXT NOT NULL DEFAULT '',
	columns         TEXT,
	row_count       INTEGER NOT NULL DEFAULT 0,
	bytes           INTEGER NOT NULL DEFAULT 0,
	created_at      TEXT NOT NULL,
	UNIQUE (conversation_id, name)
);

CREATE TABLE documents (
	id              TEXT PRIMARY KEY,
	conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
	name            TEXT NOT NULL,
	media_type      TEXT NOT NULL DEFAULT '',
	pages           INTEGER NOT NULL DEFAULT 0,
	chunks          INTEGER NOT NULL DEFAULT 0,
	bytes           INTEGER NOT NULL DEFAULT 0,
	metadata        TEXT,
	created_at      TEXT NOT NULL
);
CREATE INDEX documents_conversation_id_created_at ON documents (conversation_id, created_at);

CREATE TABLE chunks (
	id          TEXT PRIMARY KEY,
	document_id TEXT NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
	seq         INTEGER NOT NULL DEFAULT 0,
	page        INTEGER NOT NULL DEFAULT 0,
	heading     TEXT NOT NULL DEFAULT '',
	start_pos   INTEGER NOT NULL DEFAULT 0,
	end_pos     INTEGER NOT NULL DEFAULT 0,
	text        TEXT NOT NULL DEFAULT ''
);
CREATE INDEX chunks_document_id_seq ON chunks (document_id, seq);

CREATE TABLE confirmations (
	id              TEXT PRIMARY KEY,
	conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
	message_id      TEXT REFERENCES messages (id) ON DELETE CASCADE,
	call_id         TEXT NOT NULL DEFAULT '',
	action          TEXT NOT NULL,
	parameters      TEXT,
	explanation     TEXT NOT NULL DEFAULT '',
	status          TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'declined')),
	note            TEXT NOT NULL DEFAULT '',
	state           TEXT,
	created_at      TEXT NOT NULL,
	resolved_at     TEXT
);
CREATE INDEX confirmations_conversation_id_pending ON confirmations (conversation_id, created_at)
	WHERE status = 'pending';
CREATE INDEX confirmations_message_id ON confirmations (message_id);

-- token_usage keeps no foreign key to conversations or messages: usage counts
-- toward the user's daily budget after the conversation is deleted.
CREATE TABLE token_usage (
	id              TEXT PRIMARY KEY,
	user_id         TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
	conversation_id TEXT NOT NULL DEFAULT '',
	message_id      TEXT NOT NULL DEFAULT '',
	provider        TEXT NOT NULL DEFAULT '',
	model           TEXT NOT NULL DEFAULT '',
	input_tokens    INTEGER NOT NULL DEFAULT 0,
	output_tokens   INTEGER NOT NULL DEFAULT 0,
	success         INTEGER NOT NULL DEFAULT 0,
	estimated       INTEGER NOT NULL DEFAULT 0,
	created_at      TEXT NOT NULL
);
CREATE INDEX token_usage_user_id_created_at ON token_usage (user_id, created_at);

-- rate_limit_events holds the requests admitted by TakeRequest within the
-- window; older ones are deleted as the window slides. Its writes go through
-- BEGIN IMMEDIATE transactions, which serialise every process sharing the file.
CREATE TABLE rate_limit_events (
	user_id TEXT NOT NULL,
	at      TEXT NOT NULL
);
CREATE INDEX rate_limit_events_user_id_at ON rate_limit_events (user_id, at);
