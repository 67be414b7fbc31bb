-- The data dictionary: a conversation's notes (the user's business rules),
-- a dataset's description, and its columns' descriptions as a JSON object
-- from column name to text (NULL: none).
ALTER TABLE conversations ADD COLUMN notes text NOT NULL DEFAULT '';
ALTER TABLE datasets ADD COLUMN description text NOT NULL DEFAULT '';
ALTER TABLE datasets ADD COLUMN column_descriptions jsonb;

-- Verified examples: queries a user marked as correct (or wrong) answers to
-- a question, with the signature of the tables they read (name and sorted
-- columns with their types). They belong to the user, not to a
-- conversation: they outlive the one they were marked in, whose ids they
-- keep without a foreign key. One example per user and tool call: marking
-- the same call again replaces it.
CREATE TABLE examples (
	id              text PRIMARY KEY,
	row_seq         bigint GENERATED ALWAYS AS IDENTITY,
	user_id         text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
	question        text NOT NULL DEFAULT '',
	query           text NOT NULL,
	verdict         text NOT NULL CHECK (verdict IN ('correct', 'wrong')),
	tables          jsonb NOT NULL DEFAULT '[]',
	conversation_id text NOT NULL DEFAULT '',
	message_id      text NOT NULL DEFAULT '',
	call_id         text NOT NULL DEFAULT '',
	created_at      timestamptz NOT NULL
);
CREATE INDEX examples_user_id_created_at ON examples (user_id, created_at);
CREATE UNIQUE INDEX examples_user_id_call ON examples (user_id, message_id, call_id) WHERE message_id <> '';
