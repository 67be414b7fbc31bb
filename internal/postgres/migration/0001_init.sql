-- The initial schema. Tables are created unqualified, in the first schema of
-- the connection's search_path. Timestamps are timestamptz (microseconds).
-- JSON the caller gives as bytes (tool call args, confirmation parameters and
-- state) is json, which keeps those bytes; JSON the store marshals (dataset
-- columns, document metadata) is jsonb. row_seq columns record insertion
-- order and break ordering ties.

CREATE TABLE users (
	id         text PRIMARY KEY,
	name       text NOT NULL UNIQUE,
	created_at timestamptz NOT NULL
);

CREATE TABLE api_keys (
	id           text PRIMARY KEY,
	row_seq      bigint GENERATED ALWAYS AS IDENTITY,
	user_id      text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
	prefix       text NOT NULL DEFAULT '',
	hash         text NOT NULL UNIQUE,
	created_at   timestamptz NOT NULL,
	last_used_at timestamptz,
	revoked_at   timestamptz
);
CREATE INDEX api_keys_user_id ON api_keys (user_id);

CREATE TABLE conversations (
	id         text PRIMARY KEY,
	row_seq    bigint GENERATED ALWAYS AS IDENTITY,
	user_id    text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
	title      text NOT NULL DEFAULT '',
	created_at timestamptz NOT NULL,
	updated_at timestamptz NOT NULL
);
CREATE INDEX conversations_user_id_updated_at ON conversations (user_id, updated_at);

CREATE TABLE messages (
	id              text PRIMARY KEY,
	row_seq         bigint GENERATED ALWAYS AS IDENTITY,
	conversation_id text NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
	role            text NOT NULL,
	content         text NOT NULL DEFAULT '',
	status          text NOT NULL DEFAULT '',
	input_tokens    bigint NOT NULL DEFAULT 0,
	output_tokens   bigint NOT NULL DEFAULT 0,
	error           text NOT NULL DEFAULT '',
	created_at      timestamptz NOT NULL,
	updated_at      timestamptz NOT NULL
);
CREATE INDEX messages_conversation_id_created_at ON messages (conversation_id, created_at);
CREATE INDEX messages_streaming ON messages (status) WHERE status = 'streaming';

CREATE TABLE tool_calls (
	id          text PRIMARY KEY,
	row_seq     bigint GENERATED ALWAYS AS IDENTITY,
	message_id  text NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
	seq         integer NOT NULL DEFAULT 0,
	call_id     text NOT NULL DEFAULT '',
	tool        text NOT NULL,
	args        json,
	ok          boolean NOT NULL DEFAULT false,
	result      text NOT NULL DEFAULT '',
	error       text NOT NULL DEFAULT '',
	started_at  timestamptz NOT NULL,
	duration_ms bigint NOT NULL DEFAULT 0
);
CREATE INDEX tool_calls_message_id_seq ON tool_calls (message_id, seq);

CREATE TABLE datasets (
	id              text PRIMARY KEY,
	row_seq         bigint GENERATED ALWAYS AS IDENTITY,
	conversation_id text NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
	name            text NOT NULL,
	source          text NOT NULL DEFAULT '',
	format          text NOT NULL DEFAULT '',
	path            text NOT NULL DEFAULT '',
	columns         jsonb,
	row_count       bigint NOT NULL DEFAULT 0,
	bytes           bigint NOT NULL DEFAULT 0,
	created_at      timestamptz NOT NULL,
	UNIQUE (conversation_id, name)
);

CREATE TABLE documents (
	id              text PRIMARY KEY,
	row_seq         bigint GENERATED ALWAYS AS IDENTITY,
	conversation_id text NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
	name            text NOT NULL,
	media_type      text NOT NULL DEFAULT '',
	pages           integer NOT NULL DEFAULT 0,
	chunks          integer NOT NULL DEFAULT 0,
	bytes           bigint NOT NULL DEFAULT 0,
	metadata        jsonb,
	created_at      timestamptz NOT NULL
);
CREATE INDEX documents_conversation_id_created_at ON documents (conversation_id, created_at);

CREATE TABLE chunks (
	id          text PRIMARY KEY,
	row_seq     bigint GENERATED ALWAYS AS IDENTITY,
	document_id text NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
	seq         integer NOT NULL DEFAULT 0,
	page        integer NOT NULL DEFAULT 0,
	heading     text NOT NULL DEFAULT '',
	start_pos   integer NOT NULL DEFAULT 0,
	end_pos     integer NOT NULL DEFAULT 0,
	text        text NOT NULL DEFAULT ''
);
CREATE INDEX chunks_document_id_seq ON chunks (document_id, seq);

CREATE TABLE confirmations (
	id              text PRIMARY KEY,
	row_seq         bigint GENERATED ALWAYS AS IDENTITY,
	conversation_id text NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
	message_id      text REFERENCES messages (id) ON DELETE CASCADE,
	call_id         text NOT NULL DEFAULT '',
	action          text NOT NULL,
	parameters      json,
	explanation     text NOT NULL DEFAULT '',
	status          text NOT NULL CHECK (status IN ('pending', 'approved', 'declined')),
	note            text NOT NULL DEFAULT '',
	state           json,
	created_at      timestamptz NOT NULL,
	resolved_at     timestamptz
);
CREATE INDEX confirmations_conversation_id_pending ON confirmations (conversation_id, created_at)
	WHERE status = 'pending';
CREATE INDEX confirmations_message_id ON confirmations (message_id);

-- token_usage keeps no foreign key to conversations or messages: usage counts
-- toward the user's daily budget after the conversation is deleted.
CREATE TABLE token_usage (
	id              text PRIMARY KEY,
	user_id         text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
	conversation_id text NOT NULL DEFAULT '',
	message_id      text NOT NULL DEFAULT '',
	provider        text NOT NULL DEFAULT '',
	model           text NOT NULL DEFAULT '',
	input_tokens    bigint NOT NULL DEFAULT 0,
	output_tokens   bigint NOT NULL DEFAULT 0,
	success         boolean NOT NULL DEFAULT false,
	estimated       boolean NOT NULL DEFAULT false,
	created_at      timestamptz NOT NULL
);
CREATE INDEX token_usage_user_id_created_at ON token_usage (user_id, created_at);

-- rate_limiters has one row per user, locked FOR UPDATE by TakeRequest so that
-- requests of one user are counted one at a time across every process;
-- rate_limit_events holds the requests admitted within the window.
CREATE TABLE rate_limiters (
	user_id text PRIMARY KEY
);

CREATE TABLE rate_limit_events (
	id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	user_id text NOT NULL,
	at      timestamptz NOT NULL
);
CREATE INDEX rate_limit_events_user_id_at ON rate_limit_events (user_id, at);
