package llm

// Each provider's default chat and embedding models, stated once: the
// provider's client takes its own when none is configured, and the
// configuration names them (CHAT_MODEL and EMBEDDING_MODEL unset) without
// building on the clients.
const (
	GeminiModel          = "gemini-2.5-flash"
	GeminiEmbeddingModel = "text-embedding-004"
	OpenAIModel          = "gpt-4o-mini"
	OpenAIEmbeddingModel = "text-embedding-3-small"
	OllamaModel          = "llama3.1"
	OllamaEmbeddingModel = "nomic-embed-text"
)
