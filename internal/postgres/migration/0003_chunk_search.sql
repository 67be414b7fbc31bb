-- Full-text and vector search over the stored chunks (postgres.Index), so
-- that every server process on one database shares one document index. The
-- chunks stay stored once, here: an indexed chunk has tsv set (NULL: not
-- indexed) and, when an embedding model is configured, embedding (its unit
-- vector; NULL without one).
ALTER TABLE chunks
	ADD COLUMN tsv       tsvector,
	ADD COLUMN embedding real[];

-- A search reads the tsv of every chunk of the conversation that has one of
-- the question's words (most of them: the words are OR-ed), and the text of
-- only the few it returns. With the default storage, a row with both (about
-- 1 kB each) is over the 2 kB TOAST threshold and tsv was compressed or moved
-- out of line, to be fetched and decompressed for every match: ranking 100,000
-- chunks took 650 ms. Keeping tsv in the row (MAIN) and moving the text out
-- (EXTERNAL: uncompressed, as it is only read for results) made it 190 ms.
ALTER TABLE chunks
	ALTER COLUMN tsv SET STORAGE MAIN,
	ALTER COLUMN text SET STORAGE EXTERNAL;

-- chunk_tsvector is the one definition of what is searched: the chunk's text
-- (weight A), its heading path (B) and its document's name (C), the name with
-- punctuation read as spaces ("q3-report.pdf": q3, report, pdf). The 'english'
-- configuration lower-cases, drops stop words and stems. A SQL function of one
-- expression, it is inlined where it is called.
CREATE FUNCTION chunk_tsvector(body text, heading text, name text) RETURNS tsvector
	LANGUAGE sql IMMUTABLE PARALLEL SAFE
	AS $$
		SELECT setweight(to_tsvector('english'::regconfig, body), 'A')
			|| setweight(to_tsvector('english'::regconfig, heading), 'B')
			|| setweight(to_tsvector('english'::regconfig, regexp_replace(name, '[[:punct:]]+', ' ', 'g')), 'C')
	$$;

-- Only indexed chunks are in the GIN index; every search has tsv @@ …, which
-- implies tsv IS NOT NULL, so the planner uses it.
CREATE INDEX chunks_tsv ON chunks USING gin (tsv) WHERE tsv IS NOT NULL;

-- Chunks stored before this migration become searchable by full text (not by
-- vectors: a migration cannot call the embedding model).
UPDATE chunks c SET tsv = chunk_tsvector(c.text, c.heading, d.name)
	FROM documents d
	WHERE d.id = c.document_id;
