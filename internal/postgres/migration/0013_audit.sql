-- The audit log: one row per security-relevant event (datachat.AuditEvent).
-- It is append-only in the database itself, as far as PostgreSQL allows: a
-- trigger refuses every UPDATE (an INSERT … ON CONFLICT DO UPDATE included)
-- and every DELETE of a row that is not older than the cutoff a prune
-- (Store.PruneAudit) sets for its own transaction in
-- datachat.audit_prune_before; another refuses TRUNCATE. They stop a stray
-- statement and a bug; they cannot stop the table's owner, or a superuser,
-- from disabling or dropping them, nor a DROP TABLE.
--
-- No foreign keys: events outlive the users, conversations and sources they
-- name (removing a user must not need to touch its events). Texts are ''
-- rather than NULL when absent; row_count is NULL when a query returned none.
CREATE TABLE audit_events (
	id              text PRIMARY KEY,
	at              timestamptz NOT NULL,
	kind            text NOT NULL,
	outcome         text NOT NULL CHECK (outcome IN ('ok', 'refused', 'failed')),
	user_id         text NOT NULL DEFAULT '',
	user_name       text NOT NULL DEFAULT '',
	address         text NOT NULL DEFAULT '',
	request_id      text NOT NULL DEFAULT '',
	conversation_id text NOT NULL DEFAULT '',
	source          text NOT NULL DEFAULT '',
	sql_text        text NOT NULL DEFAULT '',
	sql_truncated   boolean NOT NULL DEFAULT false,
	row_count       bigint,
	duration_ms     double precision NOT NULL DEFAULT 0,
	error           text NOT NULL DEFAULT '',
	target          text NOT NULL DEFAULT '',
	detail          text NOT NULL DEFAULT ''
);
-- Newest first, by (at, id), alone or within one user, source, kind or outcome.
CREATE INDEX audit_events_at ON audit_events (at, id);
CREATE INDEX audit_events_user ON audit_events (user_name, at, id);
CREATE INDEX audit_events_source ON audit_events (source, at, id);
CREATE INDEX audit_events_kind ON audit_events (kind, at, id);
CREATE INDEX audit_events_outcome ON audit_events (outcome, at, id);

CREATE FUNCTION audit_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	cutoff text := current_setting('datachat.audit_prune_before', true);
BEGIN
	IF TG_OP = 'DELETE' AND cutoff IS NOT NULL AND cutoff <> '' AND OLD.at < cutoff::timestamptz THEN
		RETURN OLD;
	END IF;
	IF TG_OP = 'DELETE' THEN
		RAISE EXCEPTION 'audit_events is append-only: events leave it only when older than the retention (DATACHAT_AUDIT_DAYS)'
			USING ERRCODE = 'restrict_violation';
	END IF;
	RAISE EXCEPTION 'audit_events is append-only: an event cannot be changed (%)', TG_OP
		USING ERRCODE = 'restrict_violation';
END
$$;

CREATE TRIGGER audit_events_append_only BEFORE UPDATE OR DELETE ON audit_events
	FOR EACH ROW EXECUTE FUNCTION audit_events_append_only();
CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON audit_events
	FOR EACH STATEMENT EXECUTE FUNCTION audit_events_append_only();
