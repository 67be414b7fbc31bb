-- Shares (datachat.Share): who other than its owner may read a
-- conversation — one user (user_id), or everyone signed in to this server
-- (everyone = 1, user_id NULL). A share goes with its conversation and with
-- the user it names; at most one per conversation and user, and one for
-- everyone, so that sharing again changes nothing.
CREATE TABLE shares (
	id              TEXT PRIMARY KEY,
	conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
	user_id         TEXT REFERENCES users (id) ON DELETE CASCADE,
	everyone        INTEGER NOT NULL DEFAULT 0 CHECK (everyone IN (0, 1)),
	created_at      TEXT NOT NULL,
	CHECK ((user_id IS NULL) = (everyone = 1))
);
CREATE UNIQUE INDEX shares_conversation_user ON shares (conversation_id, user_id) WHERE user_id IS NOT NULL;
CREATE UNIQUE INDEX shares_conversation_everyone ON shares (conversation_id) WHERE everyone = 1;
-- What is shared with a user, and with everyone.
CREATE INDEX shares_user_id ON shares (user_id, created_at);
CREATE INDEX shares_everyone ON shares (created_at) WHERE everyone = 1;
