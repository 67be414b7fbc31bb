-- The numbers of an answer checked against its query results, cited excerpts
-- and question (JSON: [{text, start, end, status, source}]), written when it
-- ends.
ALTER TABLE messages ADD COLUMN number_checks jsonb;
