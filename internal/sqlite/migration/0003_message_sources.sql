-- The document excerpts an answer could cite ([n] is the n-th), as JSON, so
-- that citations of a reopened answer resolve as they did when it streamed.
ALTER TABLE messages ADD COLUMN sources TEXT;
