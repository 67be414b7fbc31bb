-- Accounts (datachat.AccountStore): a user's role, how they sign in, whether
-- they are disabled, their own token budget and when they were last seen;
-- the invites that set a password, browser sessions, and the single
-- sign-on identities users are found by. Tokens (of invites and sessions)
-- are kept only as their SHA-256, hex, as API keys are.
--
-- Every user already there becomes a member, except the user named admin,
-- whom serve made for its first key: they become the admin. A user without
-- a password (password_hash '') signs in with API keys, as before.
ALTER TABLE users
	ADD COLUMN role text NOT NULL DEFAULT 'member' CHECK (role IN ('admin', 'member')),
	ADD COLUMN email text NOT NULL DEFAULT '',
	ADD COLUMN password_hash text NOT NULL DEFAULT '',
	ADD COLUMN disabled_at timestamptz,
	ADD COLUMN tokens_per_day bigint CHECK (tokens_per_day >= 0),
	-- The newest use of any of the user's keys or sessions, written with
	-- it (at most once a minute each): kept when the session or key goes.
	ADD COLUMN last_seen_at timestamptz;

UPDATE users SET role = 'admin' WHERE name = 'admin';
UPDATE users SET last_seen_at = (SELECT MAX(k.last_used_at) FROM api_keys k WHERE k.user_id = users.id);

-- At most one unused invite per user: a new one replaces it. Using one
-- deletes it.
CREATE TABLE invites (
	id         text PRIMARY KEY,
	user_id    text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
	hash       text NOT NULL UNIQUE,
	created_at timestamptz NOT NULL,
	expires_at timestamptz NOT NULL
);
CREATE INDEX invites_user_id ON invites (user_id);

CREATE TABLE sessions (
	id           text PRIMARY KEY,
	user_id      text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
	hash         text NOT NULL UNIQUE,
	method       text NOT NULL CHECK (method IN ('password', 'oidc')),
	created_at   timestamptz NOT NULL,
	last_seen_at timestamptz NOT NULL
);
CREATE INDEX sessions_user_id ON sessions (user_id);

-- A person single sign-on knows: the provider (issuer) and its stable id
-- for them (subject); email is the last one it gave.
CREATE TABLE identities (
	issuer     text NOT NULL,
	subject    text NOT NULL,
	user_id    text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
	email      text NOT NULL DEFAULT '',
	created_at timestamptz NOT NULL,
	PRIMARY KEY (issuer, subject)
);
CREATE INDEX identities_user_id ON identities (user_id);

-- Sign-in attempts admitted by TakeAttempt, by the SHA-256 of their key (a
-- user name, an address): apart from rate_limit_events, since the keys are
-- chosen by whoever signs in, and each row says when it leaves its window
-- (until), so that every attempt taken deletes those that left theirs,
-- whatever their key. TakeAttempt counts one key at a time under an
-- advisory lock of the key's hash, rather than a row per key that would
-- stay forever.
CREATE TABLE auth_attempts (
	id    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	key   text NOT NULL,
	at    timestamptz NOT NULL,
	until timestamptz NOT NULL
);
CREATE INDEX auth_attempts_key_at ON auth_attempts (key, at);
CREATE INDEX auth_attempts_until ON auth_attempts (until);
