-- Per-conversation document frequencies of the indexed lexemes, so that a
-- search can leave out of its OR the question's words that nearly every
-- chunk has (PostgreSQL's ts_rank has no inverse document frequency, and
-- ranking every chunk that has a common word is what made searches of large
-- conversations slow). A row counts the conversation's indexed chunks
-- (tsv set) whose tsv has the lexeme; the row of lexeme '' (never a lexeme)
-- counts the conversation's indexed chunks. Rows may hold 0.
--
-- The counts change in the transactions that change tsv: postgres.Index
-- (Add, DeleteDocument, DeleteConversation) through chunk_lexemes_apply, and
-- deleting a stored document through the trigger below (the store deletes
-- documents, their chunks going by cascade, without the index). Every
-- writer first locks the conversation's '' row (chunk_lexemes_lock), which
-- serialises changes of a conversation's counts; a transaction then reads
-- the tsv it adds or removes with a snapshot taken after the lock.
CREATE TABLE chunk_lexemes (
	conversation_id text NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
	lexeme          text COLLATE "C" NOT NULL,
	chunks          integer NOT NULL,
	PRIMARY KEY (conversation_id, lexeme)
);

-- chunk_lexemes_lock locks the conversation's counts until commit.
CREATE FUNCTION chunk_lexemes_lock(conv text) RETURNS void
	LANGUAGE sql VOLATILE
	AS $$
		INSERT INTO chunk_lexemes (conversation_id, lexeme, chunks) VALUES (conv, '', 0)
			ON CONFLICT (conversation_id, lexeme) DO UPDATE SET chunks = chunk_lexemes.chunks
	$$;

-- chunk_lexemes_apply adds (sign 1) or subtracts (sign -1) the indexed
-- chunks of the document doc to the counts of its conversation conv, after
-- chunk_lexemes_lock. Rows are written in lexeme order.
CREATE FUNCTION chunk_lexemes_apply(conv text, doc text, sign integer) RETURNS void
	LANGUAGE sql VOLATILE
	AS $$
		INSERT INTO chunk_lexemes AS l (conversation_id, lexeme, chunks)
			SELECT conv, s.lexeme, sign * s.n
			FROM (
				SELECT ''::text AS lexeme, count(*)::integer AS n
					FROM chunks WHERE document_id = doc AND tsv IS NOT NULL
				UNION ALL
				SELECT word, ndoc
					FROM ts_stat(format('SELECT tsv FROM chunks WHERE document_id = %L AND tsv IS NOT NULL', doc))
			) s
			WHERE s.n > 0
			ORDER BY s.lexeme COLLATE "C"
		ON CONFLICT (conversation_id, lexeme) DO UPDATE SET chunks = l.chunks + excluded.chunks
	$$;

-- Deleting a stored document that has indexed chunks subtracts them. Not
-- when its conversation is being deleted: the counts go with it.
CREATE FUNCTION chunk_lexemes_document_deleted() RETURNS trigger
	LANGUAGE plpgsql
	AS $$
	BEGIN
		IF EXISTS (SELECT 1 FROM conversations WHERE id = OLD.conversation_id)
			AND EXISTS (SELECT 1 FROM chunks WHERE document_id = OLD.id AND tsv IS NOT NULL) THEN
			PERFORM chunk_lexemes_lock(OLD.conversation_id);
			PERFORM chunk_lexemes_apply(OLD.conversation_id, OLD.id, -1);
		END IF;
		RETURN OLD;
	END
	$$;

CREATE TRIGGER documents_chunk_lexemes BEFORE DELETE ON documents
	FOR EACH ROW EXECUTE FUNCTION chunk_lexemes_document_deleted();

-- Backfill: the counts of what is indexed now.
INSERT INTO chunk_lexemes (conversation_id, lexeme, chunks)
	SELECT d.conversation_id, '', count(*)
	FROM chunks c JOIN documents d ON d.id = c.document_id
	WHERE c.tsv IS NOT NULL
	GROUP BY d.conversation_id;
INSERT INTO chunk_lexemes (conversation_id, lexeme, chunks)
	SELECT d.conversation_id, s.word, s.ndoc
	FROM (SELECT DISTINCT conversation_id FROM documents) d,
		ts_stat(format('SELECT c.tsv FROM chunks c JOIN documents d ON d.id = c.document_id
			WHERE d.conversation_id = %L AND c.tsv IS NOT NULL', d.conversation_id)) s;
