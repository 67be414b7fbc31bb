-- The data dictionary: a conversation's notes (the user's business rules),
-- a dataset's description, and its columns' descriptions as a JSON object
-- from column name to text (NULL: none).
ALTER TABLE conversations ADD COLUMN notes TEXT NOT NULL DEFAULT '';
ALTER TABLE datasets ADD COLUMN description TEXT NOT NULL DEFAULT '';
ALTER TABLE datasets ADD COLUMN column_descriptions TEXT;

-- Verified examples: queries a user marked as correct (or wrong) answers to
-- a question, with the signature of the tables they read (JSON: name and
-- sorted columns with their types). They belong to the user, not to a
-- conversation: they outlive the one they were marked in, whose ids they
-- keep without a foreign key. One example per user and tool call: marking
-- the same call again replaces it.
CREATE TABLE examples (
	id              TEXT PRIMARY KEY,
	user_id         TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
	question        TEXT NOT NULL DEFAULT '',
	query           TEXT NOT NULL,
	verdict         TEXT NOT NULL CHECK (verdict IN ('correct', 'wrong')),
	tables          TEXT NOT NULL DEFAULT '[]',
	conversation_id TEXT NOT NULL DEFAULT '',
	message_id      TEXT NOT NULL DEFAULT '',
	call_id         TEXT NOT NULL DEFAULT '',
	created_at      TEXT NOT NULL
);
CREATE INDEX examples_user_id_created_at ON examples (user_id, created_at);
CREATE UNIQUE INDEX examples_user_id_call ON examples (user_id, message_id, call_id) WHERE message_id <> '';
