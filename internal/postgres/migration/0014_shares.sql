-- Shares (datachat.Share): who other than its owner may read a
-- conversation — one user (user_id), or everyone signed in to this server
-- (everyone, user_id NULL). A share goes with its conversation and with the
-- user it names; at most one per conversation and user, and one for
-- everyone, so that sharing again changes nothing.
CREATE TABLE shares (
	id              text PRIMARY KEY,
	row_seq         bigint GENERATED ALWAYS AS IDENTITY,
	conversation_id text NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
	user_id         text REFERENCES users (id) ON DELETE CASCADE,
	everyone        boolean NOT NULL DEFAULT false,
	created_at      timestamptz NOT NULL,
	CHECK ((user_id IS NULL) = everyone)
);
CREATE UNIQUE INDEX shares_conversation_user ON shares (conversation_id, user_id) WHERE user_id IS NOT NULL;
CREATE UNIQUE INDEX shares_conversation_everyone ON shares (conversation_id) WHERE everyone;
-- What is shared with a user, and with everyone.
CREATE INDEX shares_user_id ON shares (user_id, created_at);
CREATE INDEX shares_everyone ON shares (created_at) WHERE everyone;
