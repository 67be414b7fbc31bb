-- A version per conversation of what postgres.Index has indexed, so that a
-- process can keep the conversation's vectors in memory and tell, with one
-- small read per search, whether they are still those in the database.
-- Every change of the conversation's indexed chunks (Index.Add,
-- Index.DeleteDocument, Index.DeleteConversation) sets a new version in the
-- same transaction. Versions are drawn from one sequence rather than counted
-- per conversation, so that a value is never seen twice: not even after the
-- conversation is deleted (its row goes with it) and one of the same id is
-- created. A conversation without a row has version 0 and no indexed chunk.
CREATE SEQUENCE index_version_seq;

CREATE TABLE index_versions (
	conversation_id text PRIMARY KEY REFERENCES conversations (id) ON DELETE CASCADE,
	version         bigint NOT NULL
);

-- Conversations indexed before this migration get a version, keeping "no
-- row: no indexed chunk" true.
INSERT INTO index_versions (conversation_id, version)
	SELECT v.id, nextval('index_version_seq')
	FROM conversations v
	WHERE EXISTS (SELECT 1 FROM documents d JOIN chunks c ON c.document_id = d.id
		WHERE d.conversation_id = v.id AND c.tsv IS NOT NULL);
