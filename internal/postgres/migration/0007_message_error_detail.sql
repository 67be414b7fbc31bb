-- A failed answer's reason and suggested action (chat_error's), beside its
-- message, so a reopened answer still says what to do.
ALTER TABLE messages
	ADD COLUMN error_reason text NOT NULL DEFAULT '',
	ADD COLUMN error_suggested_action text NOT NULL DEFAULT '';
