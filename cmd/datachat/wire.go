package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"datachat"
	"datachat/internal/chat"
	"datachat/internal/chroma"
	"datachat/internal/config"
	"datachat/internal/dataset"
	"datachat/internal/duckdb"
	"datachat/internal/extract"
	"datachat/internal/gemini"
	"datachat/internal/llm"
	"datachat/internal/ollama"
	"datachat/internal/openai"
	"datachat/internal/postgres"
	"datachat/internal/retrieval"
	"datachat/internal/scratch"
	"datachat/internal/workspace"
)

// newWorkspace builds the SQL engine, the dataset loader and the workspace over
// st, keeping files under dataDir, with documents searched in the index
// backend names (DATACHAT_RETRIEVAL's values).
func (m *Main) newWorkspace(st datachat.Store, dataDir, backend string) (*workspace.Workspace, error) {
	cfg := m.Config
	tmpParent, datasetsParent, parents := tempParents(dataDir)
	m.sweepTemp(parents)
	tmp, err := scratch.Claim(tmpParent.dir)
	if err != nil {
		return nil, fmt.Errorf("DATACHAT_DATA_DIR: %w", err)
	}
	m.closers = append(m.closers, tmp.Release)
	uploads, err := scratch.Claim(datasetsParent.dir)
	if err != nil {
		return nil, fmt.Errorf("DATACHAT_DATA_DIR: %w", err)
	}
	m.closers = append(m.closers, uploads.Release)
	var reserve *scratch.Reserve
	if m.Command == "serve" { // the one command whose users delete
		reserve = tmp.Reserve(scratch.DefaultReserve)
		if err := reserve.Hold(); err != nil {
			m.Logger.Warn("the disk is full: no space is held back for deletes until space is freed", slog.String("error", err.Error()))
		}
	}
	m.closers = append(m.closers, m.sweepTempEvery(parents, []*scratch.Dir{tmp, uploads}, reserve))
	// PDFium compiled once is kept for the next start (seconds of CPU saved).
	extractor := extract.NewExtractor(extract.PDFOptions{CacheDir: filepath.Join(dataDir, "cache", "pdfium"), MemoryBudget: cfg.PDFMemory})
	extractor.TempDir = tmp.Path()
	m.closers = append(m.closers, extractor.Close)

	opts := duckdb.Options{
		Timeout:       cfg.QueryTimeout,
		MemoryLimit:   cfg.QueryMemory,
		Threads:       cfg.QueryThreads,
		Workers:       cfg.SQLWorkers,
		IngestWorkers: max(2, cfg.SQLWorkers/2),
		IngestTimeout: cfg.IngestTimeout,
		TempDir:       tmp.Path(),
		Logger:        m.Logger,
	}
	if m.Command == "sql" {
		// The command line over the user's own files: every row (or
		// --max-rows), every value whole, within the result's size cap.
		opts.MaxRows, opts.MaxCellBytes = -1, sqlResultMB<<20
		if n := m.flags.maxRows; n > 0 {
			opts.MaxRows = n
		}
		opts.MaxResultMB = sqlResultMB
	}
	engine, err := duckdb.New(opts)
	if err != nil {
		return nil, fmt.Errorf("start SQL engine: %w", err)
	}
	m.closers = append(m.closers, engine.Close)
	loader, err := dataset.New(dataset.Options{
		Dir:          filepath.Join(dataDir, "datasets"),
		TempDir:      uploads.Path(),
		MaxBytes:     cfg.MaxDatasetBytes,
		AllowPrivate: cfg.AllowPrivateAll,
		AllowNets:    cfg.AllowPrivateCIDRs,
		Engine:       engine,
	})
	if err != nil {
		return nil, fmt.Errorf("dataset loader: %w", err)
	}
	index, err := m.newIndex(st, dataDir, backend)
	if err != nil {
		return nil, err
	}
	return &workspace.Workspace{
		Store: st, Loader: loader, Engine: engine, Index: index, Logger: m.Logger,
		MaxDocumentBytes: cfg.MaxDocumentBytes, Extractor: extractor, Reserve: reserve,
	}, nil
}

// newIndex opens the document index DATACHAT_RETRIEVAL names: the embedded
// one in dataDir, PostgreSQL's full-text search on the store's database, or a
// Chroma server, which is asked for a heartbeat so that a wrong CHROMA_URL
// stops start-up rather than the first upload.
func (m *Main) newIndex(st datachat.Store, dataDir, backend string) (retrieval.Backend, error) {
	cfg := m.Config
	embedder, err := m.newEmbedder()
	if err != nil {
		return nil, err
	}
	switch backend {
	case "chroma":
		c, err := chroma.New(chroma.Options{URL: cfg.ChromaURL, Embedder: embedder, Logger: m.Logger})
		if err != nil {
			return nil, fmt.Errorf("DATACHAT_RETRIEVAL=chroma: %w", err)
		}
		m.closers = append(m.closers, c.Close)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Ping(ctx); err != nil {
			// The operator wants the cause, not the message a user would get.
			var de *datachat.Error
			if errors.As(err, &de) && de.Err != nil {
				err = de.Err
			}
			return nil, fmt.Errorf("DATACHAT_RETRIEVAL=chroma: %w", err)
		}
		m.Logger.Info("document index", slog.String("backend", "chroma"), slog.String("url", redactURL(cfg.ChromaURL)))
		return c, nil
	case "postgres":
		pg, ok := st.(*postgres.Store)
		if !ok {
			return nil, errors.New("DATACHAT_RETRIEVAL=postgres needs DATACHAT_DATABASE_URL=postgres://…")
		}
		m.Logger.Info("document index", slog.String("backend", "postgres"))
		return postgres.NewIndex(pg, postgres.IndexOptions{Embedder: embedder, Logger: m.Logger}), nil
	}
	index, err := retrieval.Open(context.Background(), retrieval.Options{
		Path: filepath.Join(dataDir, "index.db"), Embedder: embedder, Logger: m.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("open document index: %w", err)
	}
	m.closers = append(m.closers, index.Close)
	return index, nil
}

// redactURL returns u without its password (in the user information, or a
// password parameter as libpq accepts), for logs.
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(invalid URL)"
	}
	if q := p.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		p.RawQuery = q.Encode()
	}
	return p.Redacted()
}

// newEmbedder returns the client of EMBEDDING_PROVIDER, or nil (full-text
// retrieval only) when it is not set.
func (m *Main) newEmbedder() (retrieval.Embedder, error) {
	cfg := m.Config
	if cfg.EmbeddingProvider == "" {
		return nil, nil
	}
	c, err := m.newClient(cfg.EmbeddingProvider, cfg.Model(cfg.EmbeddingProvider), cfg.EmbeddingModel)
	if err != nil {
		return nil, err
	}
	m.Logger.Info("embeddings", slog.String("provider", cfg.EmbeddingProvider), slog.String("model", cfg.EmbeddingModel))
	return c, nil
}

// newRunner builds the chat runner with the configured provider, or none.
func (m *Main) newRunner(st datachat.Store, data chat.Data) (*chat.Runner, error) {
	cfg := m.Config
	provider := cfg.Provider(ollamaAnswers)
	r := &chat.Runner{
		Store:           st,
		Data:            data,
		Provider:        provider,
		ModelID:         cfg.Model(provider),
		Window:          cfg.Window(provider),
		MaxOutputTokens: cfg.ChatMaxTokens,
		Temperature:     cfg.ChatTemperature,
		MaxContextDocs:  cfg.ChatMaxContextDocs,
		MaxQueryChars:   cfg.MaxQueryChars,
		ConfirmAlways:   cfg.ConfirmSQL == "always",
		SaveAsMaxRows:   cfg.SaveAsMaxRows,
		SchemaBudget:    cfg.SchemaBudget,
		CheckNumbers:    cfg.CheckNumbers,
		Streaming:       cfg.EnableStreaming,
		RateLimitRPM:    cfg.RateLimitRPM,
		TokensPerDay:    cfg.TokensPerDay,
		Logger:          m.Logger,
	}
	if cfg.SystemPromptPath != "" {
		b, err := os.ReadFile(cfg.SystemPromptPath)
		if err != nil {
			return nil, fmt.Errorf("CHAT_DEFAULT_SYSTEM_PROMPT_PATH: %w", err)
		}
		t, err := chat.ParseTemplate(string(b))
		if err != nil {
			return nil, fmt.Errorf("CHAT_DEFAULT_SYSTEM_PROMPT_PATH: %w", err)
		}
		r.Template = t
	}
	model, err := m.newModel(provider)
	if err != nil {
		return nil, err
	}
	r.Model = model
	// The prompt's tables are ranked by their embeddings too, with the
	// documents' embedding model.
	if r.Embedder, err = m.newEmbedder(); err != nil {
		return nil, err
	}
	if model == nil {
		if m.Command == "ask" || m.Command == "eval" {
			return r, nil // they say so themselves, as their error
		}
		m.Logger.Warn("no LLM provider configured: chat answers with an error until GEMINI_API_KEY, OPENAI_API_KEY or OLLAMA_HOST is set")
	} else {
		m.Logger.Info("LLM provider", slog.String("provider", provider), slog.String("model", r.ModelID), slog.Int("context_window", r.Window))
	}
	return r, nil
}

// chatModel is a provider client: a model that can also embed.
type chatModel interface {
	chat.Model
	retrieval.Embedder
}

func (m *Main) newModel(provider string) (chatModel, error) {
	return m.newClient(provider, m.Config.Model(provider), m.Config.EmbeddingModel)
}

// newClient returns a provider's client for a chat model and an embedding model.
func (m *Main) newClient(provider, model, embeddingModel string) (chatModel, error) {
	cfg := m.Config
	transport := llm.Transport{ConnectTimeout: cfg.LLMConnectTimeout, StreamIdleTimeout: cfg.LLMStreamIdleTimeout, RetryDelay: cfg.LLMRetryDelay, Logger: m.Logger}
	switch provider {
	case config.Gemini:
		return gemini.New(gemini.Options{
			APIKey:         cfg.GeminiAPIKey,
			BaseURL:        cfg.GeminiBaseURL,
			Model:          model,
			EmbeddingModel: embeddingModel,
			Transport:      transport,
		}), nil
	case config.OpenAI:
		return openai.New(openai.Options{
			APIKey:         cfg.OpenAIAPIKey,
			BaseURL:        cfg.OpenAIBaseURL,
			Model:          model,
			EmbeddingModel: embeddingModel,
			Transport:      transport,
		}), nil
	case config.Ollama:
		return ollama.New(ollama.Options{
			Host:           cfg.OllamaHost,
			Model:          model,
			EmbeddingModel: embeddingModel,
			NumCtx:         cfg.OllamaNumCtx,
			Transport:      transport,
		}), nil
	}
	return nil, nil
}

// ollamaAnswers reports whether something listens at an Ollama host, for
// choosing a provider when no key is set.
func ollamaAnswers(host string) bool {
	u, err := url.Parse(ollama.HostURL(host))
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return false
	}
	c.Close()
	return true
}
