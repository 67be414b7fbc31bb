-- Leases of streaming messages (datachat.Lease): which process run streams a
-- message (lease_owner), where it serves (lease_node: host and listen
-- address), and until when it counts as alive (lease_until, NULL for none).
-- With several processes on one database, start-up interrupts only the
-- streaming messages whose writer is gone, not another process's live turns.
ALTER TABLE messages
	ADD COLUMN lease_owner text NOT NULL DEFAULT '',
	ADD COLUMN lease_node  text NOT NULL DEFAULT '',
	ADD COLUMN lease_until timestamptz;

-- A turn starts only when its conversation has no live streaming message.
CREATE INDEX messages_conversation_id_streaming ON messages (conversation_id)
	WHERE status = 'streaming';
