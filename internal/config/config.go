// Package config reads datachat's configuration from the environment and an
// optional YAML file, applies defaults and validates every value.
package config

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"datachat/internal/llm"
	"datachat/internal/yamlsafe"
)

// Config is datachat's whole configuration. Zero values are never used: Load
// fills defaults for everything that is not set.
type Config struct {
	Addr string // DATACHAT_ADDR
	// DataDir is DATACHAT_DATA_DIR made absolute, else DefaultDataDir: a fixed
	// place per user, so that every command finds the same data wherever it runs.
	DataDir     string
	DataDirSet  bool   // DATACHAT_DATA_DIR was given
	DatabaseURL string // DATACHAT_DATABASE_URL; "" means SQLite in DataDir

	LLMProvider          string // LLM_PROVIDER: "" (choose from keys), gemini, openai, ollama
	GeminiAPIKey         string
	GeminiBaseURL        string
	OpenAIAPIKey         string
	OpenAIBaseURL        string
	OllamaHost           string
	OllamaHostSet        bool // OLLAMA_HOST was given explicitly
	OllamaNumCtx         int
	ChatModel            string // CHAT_MODEL; "" means the provider's default
	ContextWindow        int    // LLM_CONTEXT_WINDOW; 0 means the model's default
	LLMConnectTimeout    time.Duration
	LLMStreamIdleTimeout time.Duration
	LLMRetryDelay        time.Duration

	EmbeddingProvider string // "" (off), gemini, openai, ollama
	EmbeddingModel    string
	Retrieval         string // embedded, chroma, postgres
	ChromaURL         string

	ChatMaxTokens       int
	ChatTemperature     float64
	ChatMaxContextDocs  int
	AllowedMetadataKeys []string
	SystemPromptPath    string
	EnableStreaming     bool
	MaxQueryChars       int

	RateLimitRPM int
	TokensPerDay int64

	// Per-user budgets of the expensive endpoints, each its own (0: off).
	SQLRPM         int // DATACHAT_SQL_RPM: POST …/sql and MCP execute_sql, a minute
	SearchRPM      int // DATACHAT_SEARCH_RPM: POST …/search and MCP search_documents, a minute
	UploadsPerHour int // DATACHAT_UPLOADS_PER_HOUR: POST …/datasets, …/documents and MCP load_dataset

	MaxWSPerUser   int // DATACHAT_MAX_WS_PER_USER: chat WebSockets one user may hold open (0: no cap)
	MaxConnections int // DATACHAT_MAX_CONNECTIONS: open HTTP connections (0: no cap)
	// A request body must deliver at least BodyMinBytes every
	// BodyReadTimeout (DATACHAT_BODY_MIN_BYTES, DATACHAT_BODY_READ_TIMEOUT).
	BodyReadTimeout time.Duration
	BodyMinBytes    int64
	// The server pings each chat WebSocket every WSPingInterval and drops a
	// client that does not answer within WSPingTimeout as gone
	// (DATACHAT_WS_PING_INTERVAL, DATACHAT_WS_PING_TIMEOUT).
	WSPingInterval time.Duration
	WSPingTimeout  time.Duration
	// A chat WebSocket's client that leaves more than WSOutboxBytes of
	// events unsent, or takes longer than WriteTimeout to take one, is cut
	// (its answer goes on and is stored); WriteTimeout bounds each write of
	// a streaming /v1 answer too (DATACHAT_WS_OUTBOX_BYTES,
	// DATACHAT_WRITE_TIMEOUT).
	WSOutboxBytes int
	WriteTimeout  time.Duration
	// AuthCheckInterval is how often serve checks, in the database, that
	// the keys of its open requests and WebSockets are still valid, so that
	// a key revoked by another process ends them within about this long
	// (DATACHAT_AUTH_CHECK_INTERVAL).
	AuthCheckInterval time.Duration

	QueryTimeout  time.Duration
	QueryMemory   int64
	QueryThreads  int
	SQLWorkers    int           // SQL queries running at once, each in its conversation's worker process
	IngestTimeout time.Duration // one dataset's check and conversion

	MaxDatasetBytes  int64
	MaxDocumentBytes int64
	// PDFMemory caps the memory of the PDF reader for all the PDF files read
	// at once (internal/extract's PDFOptions.MemoryBudget; each reserves the
	// per-document limit, 256 MiB, before it starts).
	PDFMemory int64

	// AllowPrivateAll lets load_dataset reach any address; otherwise only the
	// prefixes in AllowPrivateCIDRs are allowed among non-public addresses.
	AllowPrivateAll   bool
	AllowPrivateCIDRs []netip.Prefix

	ConfirmSQL string // unsure, always

	// SaveAsMaxRows caps the rows execute_sql's save_as brings from a
	// database source into a conversation (DATACHAT_SAVE_AS_MAX_ROWS).
	SaveAsMaxRows int
	// SchemaBudget is how many tokens the prompt's tables may take before
	// it holds only those relevant to the question (DATACHAT_SCHEMA_BUDGET).
	SchemaBudget int

	CheckNumbers bool // DATACHAT_CHECK_NUMBERS: check an answer's numbers against its evidence

	LogLevel     slog.Level
	LogFormat    string // json, text
	LogLevelSet  bool   // DATACHAT_LOG_LEVEL was given (else LogLevel is the default, info)
	LogFormatSet bool   // DATACHAT_LOG_FORMAT was given (else LogFormat is the default, json)

	// ProfileDir, when set, makes serve write an execution trace and CPU,
	// heap, mutex and block profiles of its run there (DATACHAT_PROFILE_DIR;
	// off by default: it slows serve down).
	ProfileDir string
	// ProfileTrace (DATACHAT_PROFILE_TRACE, default true) adds the execution
	// trace and the mutex and block profiles to ProfileDir's CPU and heap
	// profiles; they show what goroutines wait for, and slow serve down the
	// most.
	ProfileTrace bool
	// SecretKey is DATACHAT_SECRET_KEY, the key that seals database sources'
	// credentials (32 bytes in standard base64); "" means the key file
	// secret.key in DataDir, made on first use.
	SecretKey string
	// Sources is DATACHAT_SOURCES: the database sources serve applies when
	// it starts (a list in the --config file). nil when not set; an empty
	// list when set to none.
	Sources []SourceConfig

	// PublicURL is DATACHAT_PUBLIC_URL, the origin people open datachat at
	// (https://chat.example.com); "" when not set. Single sign-on needs it.
	PublicURL string
	OIDC      OIDC // DATACHAT_OIDC_*: single sign-on, on when OIDC.Issuer is set
	// AuditDays is DATACHAT_AUDIT_DAYS: how many days serve keeps audit
	// events (default 365); 0 keeps them forever.
	AuditDays int

	// SessionIdle is DATACHAT_SESSION_IDLE: how long a browser's sign-in
	// lasts unused (default 168h, a week).
	SessionIdle time.Duration
	// Sign-in attempts (passwords and invites) allowed in 15 minutes per
	// user name (DATACHAT_SIGNIN_PER_USER, default 10) and per address
	// (DATACHAT_SIGNIN_PER_ADDRESS, default 50); 0 is no limit.
	SignInPerUser    int
	SignInPerAddress int
}

// Provider names.
const (
	Gemini = "gemini"
	OpenAI = "openai"
	Ollama = "ollama"
)

// Lookup reads one variable; os.LookupEnv has this shape.
type Lookup func(key string) (string, bool)

// Load builds a Config from the YAML file at path (none if path is empty) and
// the environment read through env, which wins over the file. The error names
// every bad variable and what it accepts.
func Load(path string, env Lookup) (*Config, error) {
	file := map[string]string{}
	if path != "" {
		var err error
		if file, err = readFile(path); err != nil {
			return nil, err
		}
	}
	get := func(key string) (string, bool) {
		if v, ok := env(key); ok {
			return v, true
		}
		v, ok := file[key]
		return v, ok
	}
	p := &parser{get: get, asked: map[string]bool{}}
	c := &Config{
		Addr:        p.addr("DATACHAT_ADDR", "127.0.0.1:8080"),
		DataDir:     p.str("DATACHAT_DATA_DIR", ""),
		DatabaseURL: p.databaseURL("DATACHAT_DATABASE_URL"),

		LLMProvider:          p.oneOf("LLM_PROVIDER", "", "gemini", "openai", "ollama"),
		GeminiAPIKey:         p.str("GEMINI_API_KEY", ""),
		GeminiBaseURL:        p.url("GEMINI_BASE_URL", ""),
		OpenAIAPIKey:         p.str("OPENAI_API_KEY", ""),
		OpenAIBaseURL:        p.url("OPENAI_BASE_URL", ""),
		OllamaHost:           p.str("OLLAMA_HOST", "http://127.0.0.1:11434"),
		OllamaNumCtx:         p.integer("OLLAMA_NUM_CTX", 0, 0),
		ChatModel:            p.str("CHAT_MODEL", ""),
		ContextWindow:        p.integer("LLM_CONTEXT_WINDOW", 0, 1),
		LLMConnectTimeout:    p.duration("LLM_CONNECT_TIMEOUT", 10*time.Second),
		LLMStreamIdleTimeout: p.duration("LLM_STREAM_IDLE_TIMEOUT", 60*time.Second),
		LLMRetryDelay:        p.durationMin("LLM_RETRY_DELAY", 2*time.Second, 0),

		EmbeddingProvider: p.oneOf("EMBEDDING_PROVIDER", "", "gemini", "openai", "ollama"),
		EmbeddingModel:    p.str("EMBEDDING_MODEL", ""),
		Retrieval:         p.oneOf("DATACHAT_RETRIEVAL", "embedded", "embedded", "chroma", "postgres"),
		ChromaURL:         p.url("CHROMA_URL", ""),

		ChatMaxTokens:       p.integer("CHAT_MAX_TOKENS", 2048, 1),
		ChatTemperature:     p.float("CHAT_TEMPERATURE", 0.7, 0, 2),
		ChatMaxContextDocs:  p.integer("CHAT_MAX_CONTEXT_DOCS", 5, 0),
		AllowedMetadataKeys: p.list("CHAT_ALLOWED_METADATA_KEYS"),
		SystemPromptPath:    p.str("CHAT_DEFAULT_SYSTEM_PROMPT_PATH", ""),
		ProfileDir:          p.str("DATACHAT_PROFILE_DIR", ""),
		ProfileTrace:        p.boolean("DATACHAT_PROFILE_TRACE", true),
		EnableStreaming:     p.boolean("CHAT_ENABLE_STREAMING", true),
		MaxQueryChars:       p.integer("CHAT_MAX_QUERY_CHARS", 2000, 1),

		RateLimitRPM: p.integer("DATACHAT_RATE_LIMIT_RPM", 60, 0),
		TokensPerDay: int64(p.integer("DATACHAT_TOKENS_PER_DAY", 2_000_000, 0)),

		SQLRPM:          p.integer("DATACHAT_SQL_RPM", 120, 0),
		SearchRPM:       p.integer("DATACHAT_SEARCH_RPM", 120, 0),
		UploadsPerHour:  p.integer("DATACHAT_UPLOADS_PER_HOUR", 100, 0),
		MaxWSPerUser:    p.integer("DATACHAT_MAX_WS_PER_USER", 32, 0),
		WSPingInterval:  p.durationMin("DATACHAT_WS_PING_INTERVAL", 20*time.Second, 10*time.Millisecond),
		WSPingTimeout:   p.durationMin("DATACHAT_WS_PING_TIMEOUT", 10*time.Second, 10*time.Millisecond),
		WSOutboxBytes:   int(p.size("DATACHAT_WS_OUTBOX_BYTES", 1<<20, 64<<10)),
		WriteTimeout:    p.durationMin("DATACHAT_WRITE_TIMEOUT", 10*time.Second, 10*time.Millisecond),
		MaxConnections:  p.integer("DATACHAT_MAX_CONNECTIONS", 4096, 0),
		BodyReadTimeout: p.durationMin("DATACHAT_BODY_READ_TIMEOUT", 30*time.Second, time.Second),
		BodyMinBytes:    p.size("DATACHAT_BODY_MIN_BYTES", 64<<10, 1),

		AuthCheckInterval: p.durationMin("DATACHAT_AUTH_CHECK_INTERVAL", 500*time.Millisecond, 10*time.Millisecond),

		QueryTimeout:  p.durationMin("DATACHAT_QUERY_TIMEOUT", 30*time.Second, time.Millisecond),
		QueryMemory:   p.size("DATACHAT_QUERY_MEMORY", 1<<30, 16<<20),
		QueryThreads:  p.integer("DATACHAT_QUERY_THREADS", runtime.NumCPU(), 1),
		SQLWorkers:    p.integer("DATACHAT_SQL_WORKERS", runtime.NumCPU(), 1),
		IngestTimeout: p.durationMin("DATACHAT_INGEST_TIMEOUT", 10*time.Minute, time.Second),

		MaxDatasetBytes:  p.size("DATACHAT_MAX_DATASET_BYTES", 2<<30, 1),
		MaxDocumentBytes: p.size("DATACHAT_MAX_DOCUMENT_BYTES", 100<<20, 1),
		PDFMemory:        p.size("DATACHAT_PDF_MEMORY", 512<<20, 32<<20),

		ConfirmSQL:    p.oneOf("DATACHAT_CONFIRM_SQL", "unsure", "unsure", "always"),
		SaveAsMaxRows: p.integer("DATACHAT_SAVE_AS_MAX_ROWS", 1_000_000, 1),
		SchemaBudget:  p.integer("DATACHAT_SCHEMA_BUDGET", 8000, 500),
		CheckNumbers:  p.oneOf("DATACHAT_CHECK_NUMBERS", "on", "on", "off") == "on",

		LogLevel:  p.logLevel("DATACHAT_LOG_LEVEL"),
		LogFormat: p.oneOf("DATACHAT_LOG_FORMAT", "json", "json", "text"),

		SecretKey: p.secretKey("DATACHAT_SECRET_KEY"),
		Sources:   p.sources("DATACHAT_SOURCES"),

		PublicURL: p.publicURL("DATACHAT_PUBLIC_URL"),
		OIDC:      p.oidc(),
		AuditDays: p.integerIn("DATACHAT_AUDIT_DAYS", 365, 0, 36500, "0 (keep audit events forever)"),

		SessionIdle:      p.durationMin("DATACHAT_SESSION_IDLE", 168*time.Hour, time.Minute),
		SignInPerUser:    p.integer("DATACHAT_SIGNIN_PER_USER", 10, 0),
		SignInPerAddress: p.integer("DATACHAT_SIGNIN_PER_ADDRESS", 50, 0),
	}
	p.oneOf("CHAT_RESPONSE_FORMAT", "text", "text") // reserved: only text is accepted
	_, c.OllamaHostSet = get("OLLAMA_HOST")
	_, c.LogLevelSet = p.raw("DATACHAT_LOG_LEVEL")
	_, c.LogFormatSet = p.raw("DATACHAT_LOG_FORMAT")
	c.DataDirSet = c.DataDir != ""
	if !c.DataDirSet {
		// The environment only: the file configures datachat, not where home is.
		d, err := defaultDataDir(runtime.GOOS, env)
		if err != nil {
			p.errs = append(p.errs, fmt.Errorf("DATACHAT_DATA_DIR is not set, and its default cannot be found (%v): set DATACHAT_DATA_DIR", err))
		}
		c.DataDir = d
	} else if abs, err := filepath.Abs(c.DataDir); err == nil {
		c.DataDir = abs
	}
	c.AllowPrivateAll, c.AllowPrivateCIDRs = p.allowPrivate("DATACHAT_ALLOW_PRIVATE_URLS")
	// The variables are those Load reads: a key of the file it did not ask
	// for is a typing mistake, or a setting this version does not have.
	var unknown []string
	for k := range file {
		if !p.asked[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return nil, fmt.Errorf("--config %s: unknown key %s (the variables are listed in the README)", path, strings.Join(unknown, ", "))
	}
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// Validate checks the rules that span several variables.
func (c *Config) Validate() error {
	var errs []error
	if c.LLMProvider == Gemini && c.GeminiAPIKey == "" {
		errs = append(errs, errors.New("LLM_PROVIDER=gemini needs GEMINI_API_KEY"))
	}
	if c.LLMProvider == OpenAI && c.OpenAIAPIKey == "" && c.OpenAIBaseURL == "" {
		errs = append(errs, errors.New("LLM_PROVIDER=openai needs OPENAI_API_KEY (or OPENAI_BASE_URL for a server without keys)"))
	}
	if c.Retrieval == "chroma" && c.ChromaURL == "" {
		errs = append(errs, errors.New("DATACHAT_RETRIEVAL=chroma needs CHROMA_URL"))
	}
	if c.Retrieval == "chroma" && c.EmbeddingProvider == "" {
		errs = append(errs, errors.New("DATACHAT_RETRIEVAL=chroma needs EMBEDDING_PROVIDER: Chroma searches by vectors and does not embed text itself"))
	}
	if c.Retrieval == "postgres" && !IsPostgres(c.DatabaseURL) {
		errs = append(errs, errors.New("DATACHAT_RETRIEVAL=postgres needs DATACHAT_DATABASE_URL=postgres://…"))
	}
	if err := c.validateOIDC(); err != nil {
		errs = append(errs, err)
	}
	if c.EmbeddingProvider != "" && c.EmbeddingModel == "" {
		c.EmbeddingModel = map[string]string{
			Gemini: llm.GeminiEmbeddingModel, OpenAI: llm.OpenAIEmbeddingModel, Ollama: llm.OllamaEmbeddingModel,
		}[c.EmbeddingProvider]
	}
	return errors.Join(errs...)
}

// DefaultDataDir is the data directory when DATACHAT_DATA_DIR is not set, read
// from the environment through env: $XDG_DATA_HOME/datachat, else
// ~/.local/share/datachat (the XDG base directory default); on macOS
// ~/Library/Application Support/datachat, on Windows %LocalAppData%\datachat.
// It does not depend on the working directory.
func DefaultDataDir(env Lookup) (string, error) {
	return defaultDataDir(runtime.GOOS, env)
}

func defaultDataDir(goos string, env Lookup) (string, error) {
	get := func(key string) string {
		v, _ := env(key)
		return v
	}
	switch goos {
	case "windows":
		if d := get("LocalAppData"); d != "" {
			return filepath.Join(d, "datachat"), nil
		}
		return "", errors.New("%LocalAppData% is not set")
	case "darwin", "ios":
		// As os.UserConfigDir: macOS keeps application data in
		// ~/Library/Application Support, whatever XDG_DATA_HOME says.
		if h := get("HOME"); h != "" {
			return filepath.Join(h, "Library", "Application Support", "datachat"), nil
		}
		return "", errors.New("$HOME is not set")
	}
	// The XDG base directory specification ignores a relative XDG_DATA_HOME.
	if d := get("XDG_DATA_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "datachat"), nil
	}
	if h := get("HOME"); h != "" {
		return filepath.Join(h, ".local", "share", "datachat"), nil
	}
	return "", errors.New("neither $XDG_DATA_HOME nor $HOME is set")
}

// IsPostgres reports whether a database URL names PostgreSQL.
func IsPostgres(u string) bool {
	return strings.HasPrefix(u, "postgres://") || strings.HasPrefix(u, "postgresql://")
}

// Provider returns the configured LLM provider: LLM_PROVIDER if set, else the
// first of Gemini and OpenAI with a key, else Ollama if OLLAMA_HOST was set or
// ollamaReachable says one answers, else "".
func (c *Config) Provider(ollamaReachable func(host string) bool) string {
	switch {
	case c.LLMProvider != "":
		return c.LLMProvider
	case c.GeminiAPIKey != "":
		return Gemini
	case c.OpenAIAPIKey != "":
		return OpenAI
	case c.OllamaHostSet || (ollamaReachable != nil && ollamaReachable(c.OllamaHost)):
		return Ollama
	}
	return ""
}

// Model returns CHAT_MODEL, or the default model of provider.
func (c *Config) Model(provider string) string {
	if c.ChatModel != "" {
		return c.ChatModel
	}
	switch provider {
	case OpenAI:
		return llm.OpenAIModel
	case Ollama:
		return llm.OllamaModel
	}
	return llm.GeminiModel
}

// Window returns the model's context window in tokens (LLM_CONTEXT_WINDOW if set).
func (c *Config) Window(provider string) int {
	switch {
	case c.ContextWindow > 0:
		return c.ContextWindow
	case provider == Ollama && c.OllamaNumCtx > 0:
		return c.OllamaNumCtx
	case provider == Gemini && strings.HasPrefix(c.Model(provider), "gemini-2.5-flash"):
		return 1_048_576
	}
	return 128_000
}

// maxConfigBytes caps the --config file.
const maxConfigBytes = 1 << 20

func readFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	// The operator's own file, but read within the same limits as files
	// from users (internal/yamlsafe): a mistake should not hang start-up.
	var raw map[string]any
	err = yamlsafe.Unmarshal(context.Background(), b, &raw, yamlsafe.Options{What: "--config " + path, MaxBytes: maxConfigBytes})
	var ye *yamlsafe.Error
	if errors.As(err, &ye) && (ye.Kind == yamlsafe.Syntax || ye.Kind == yamlsafe.Shape) {
		return nil, fmt.Errorf("--config %s: not a YAML mapping of variable names to values: %w", path, err)
	} else if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(raw))
	for k, v := range raw {
		key := strings.ToUpper(k)
		if key == "DATACHAT_SOURCES" { // a list of mappings, parsed as such
			text, err := yamlText(v)
			if err != nil {
				return nil, fmt.Errorf("--config %s: DATACHAT_SOURCES: want a list of sources", path)
			}
			out[key] = text
			continue
		}
		switch v := v.(type) {
		case nil:
			out[key] = ""
		case []any:
			parts := make([]string, len(v))
			for i, e := range v {
				parts[i] = fmt.Sprint(e)
			}
			out[key] = strings.Join(parts, ",")
		case map[string]any:
			return nil, fmt.Errorf("--config %s: %s: want a single value, got a mapping", path, k)
		default:
			out[key] = fmt.Sprint(v)
		}
	}
	return out, nil
}
