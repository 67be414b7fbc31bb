-- The semantic layer of a conversation's data dictionary (JSON: the
-- datasets' metrics, synonyms and relationships by dataset id, and the
-- descriptions and semantics of its database sources' tables), beside the
-- descriptions the datasets' rows hold.
CREATE TABLE semantic_layers (
	conversation_id TEXT PRIMARY KEY REFERENCES conversations (id) ON DELETE CASCADE,
	layer           TEXT NOT NULL
);
