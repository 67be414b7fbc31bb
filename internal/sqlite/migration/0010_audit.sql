-- The audit log: one row per security-relevant event (datachat.AuditEvent).
-- It is append-only in the database itself, as far as SQLite allows:
-- triggers refuse an UPDATE, a DELETE of a row that is not older than a
-- prune's cutoff, and an INSERT reusing an id (INSERT OR REPLACE would
-- otherwise delete the old row without firing the DELETE trigger). A prune
-- (Store.PruneAudit) writes its cutoff into audit_prune, deletes, and clears
-- audit_prune, in one transaction. The triggers stop a stray statement and
-- a bug; they cannot stop whoever can write the file from dropping them.
--
-- No foreign keys: events outlive the users, conversations and sources they
-- name (removing a user must not need to touch its events). Texts are ''
-- rather than NULL when absent; row_count is NULL when a query returned none.
CREATE TABLE audit_events (
	id              TEXT PRIMARY KEY,
	at              TEXT NOT NULL,
	kind            TEXT NOT NULL,
	outcome         TEXT NOT NULL CHECK (outcome IN ('ok', 'refused', 'failed')),
	user_id         TEXT NOT NULL DEFAULT '',
	user_name       TEXT NOT NULL DEFAULT '',
	address         TEXT NOT NULL DEFAULT '',
	request_id      TEXT NOT NULL DEFAULT '',
	conversation_id TEXT NOT NULL DEFAULT '',
	source          TEXT NOT NULL DEFAULT '',
	sql_text        TEXT NOT NULL DEFAULT '',
	sql_truncated   INTEGER NOT NULL DEFAULT 0,
	row_count       INTEGER,
	duration_ms     REAL NOT NULL DEFAULT 0,
	error           TEXT NOT NULL DEFAULT '',
	target          TEXT NOT NULL DEFAULT '',
	detail          TEXT NOT NULL DEFAULT ''
);
-- Newest first, by (at, id), alone or within one user, source, kind or outcome.
CREATE INDEX audit_events_at ON audit_events (at, id);
CREATE INDEX audit_events_user ON audit_events (user_name, at, id);
CREATE INDEX audit_events_source ON audit_events (source, at, id);
CREATE INDEX audit_events_kind ON audit_events (kind, at, id);
CREATE INDEX audit_events_outcome ON audit_events (outcome, at, id);

CREATE TABLE audit_prune (
	before TEXT NOT NULL
);

CREATE TRIGGER audit_events_no_update BEFORE UPDATE ON audit_events
BEGIN
	SELECT RAISE(ABORT, 'audit_events is append-only: an event cannot be changed');
END;

CREATE TRIGGER audit_events_no_delete BEFORE DELETE ON audit_events
WHEN NOT EXISTS (SELECT 1 FROM audit_prune WHERE old.at < audit_prune.before)
BEGIN
	SELECT RAISE(ABORT, 'audit_events is append-only: events leave it only when older than the retention (DATACHAT_AUDIT_DAYS)');
END;

CREATE TRIGGER audit_events_no_replace BEFORE INSERT ON audit_events
WHEN EXISTS (SELECT 1 FROM audit_events WHERE id = new.id)
BEGIN
	SELECT RAISE(ABORT, 'audit_events is append-only: an event cannot be replaced');
END;
