-- An answer's text and tool calls in the order they streamed. While it
-- streams, each flush appends only what came since the last one (bytes
-- written grow linearly with the answer); when it ends, the rows are replaced
-- by its merged parts.
CREATE TABLE message_parts (
	message_id text NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
	seq        integer NOT NULL,
	kind       text NOT NULL CHECK (kind IN ('text', 'tool_call')),
	text       text NOT NULL DEFAULT '',
	call_id    text NOT NULL DEFAULT '',
	PRIMARY KEY (message_id, seq)
);
