package config

import (
	"datachat/internal/testfiles"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// env is a Lookup over m, with a HOME unless m sets one (the default data
// directory is under it).
func env(m map[string]string) Lookup {
	return func(k string) (string, bool) {
		v, ok := m[k]
		if !ok && k == "HOME" {
			return "/home/test", true
		}
		return v, ok
	}
}

func TestDefaults(t *testing.T) {
	c, err := Load("", env(nil))
	if err != nil {
		t.Fatal(err)
	}
	dataDir, err := DefaultDataDir(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != "127.0.0.1:8080" || c.DataDir != dataDir || c.DataDirSet || c.DatabaseURL != "" {
		t.Errorf("got addr %q dir %q (set %v) db %q", c.Addr, c.DataDir, c.DataDirSet, c.DatabaseURL)
	}
	if c.LogLevel != slog.LevelInfo || c.LogFormat != "json" || c.LogLevelSet || c.LogFormatSet {
		t.Errorf("got log level %v (set %v), format %q (set %v)", c.LogLevel, c.LogLevelSet, c.LogFormat, c.LogFormatSet)
	}
	if c.ChatMaxTokens != 2048 || c.ChatTemperature != 0.7 || c.ChatMaxContextDocs != 5 || c.MaxQueryChars != 2000 {
		t.Errorf("got chat defaults %d %v %d %d", c.ChatMaxTokens, c.ChatTemperature, c.ChatMaxContextDocs, c.MaxQueryChars)
	}
	if c.QueryTimeout != 30*time.Second || c.QueryMemory != 1<<30 || c.MaxDatasetBytes != 2<<30 || c.MaxDocumentBytes != 100<<20 {
		t.Errorf("got query defaults %v %d %d %d", c.QueryTimeout, c.QueryMemory, c.MaxDatasetBytes, c.MaxDocumentBytes)
	}
	if c.LLMConnectTimeout != 10*time.Second || c.LLMStreamIdleTimeout != time.Minute || c.LLMRetryDelay != 2*time.Second {
		t.Errorf("got LLM timeouts %v %v %v", c.LLMConnectTimeout, c.LLMStreamIdleTimeout, c.LLMRetryDelay)
	}
	if !c.EnableStreaming || c.ConfirmSQL != "unsure" || c.Retrieval != "embedded" || c.RateLimitRPM != 60 || c.TokensPerDay != 2_000_000 {
		t.Errorf("got %v %q %q %d %d", c.EnableStreaming, c.ConfirmSQL, c.Retrieval, c.RateLimitRPM, c.TokensPerDay)
	}
	if c.SQLRPM != 120 || c.SearchRPM != 120 || c.UploadsPerHour != 100 || c.MaxWSPerUser != 32 || c.MaxConnections != 4096 {
		t.Errorf("got budgets sql %d search %d uploads %d ws %d conns %d", c.SQLRPM, c.SearchRPM, c.UploadsPerHour, c.MaxWSPerUser, c.MaxConnections)
	}
	if c.AuthCheckInterval != 500*time.Millisecond {
		t.Errorf("auth check interval: got %v, want 500ms", c.AuthCheckInterval)
	}
	if c, err := Load("", env(map[string]string{"DATACHAT_AUTH_CHECK_INTERVAL": "2s"})); err != nil || c.AuthCheckInterval != 2*time.Second {
		t.Errorf("DATACHAT_AUTH_CHECK_INTERVAL=2s: got %v, %v", c, err)
	}
	if c.SessionIdle != 168*time.Hour || c.SignInPerUser != 10 || c.SignInPerAddress != 50 {
		t.Errorf("sign-in: got idle %v, %d per user, %d per address; want 168h, 10, 50", c.SessionIdle, c.SignInPerUser, c.SignInPerAddress)
	}
	if c, err := Load("", env(map[string]string{"DATACHAT_SESSION_IDLE": "12h", "DATACHAT_SIGNIN_PER_USER": "0", "DATACHAT_SIGNIN_PER_ADDRESS": "1_000"})); err != nil ||
		c.SessionIdle != 12*time.Hour || c.SignInPerUser != 0 || c.SignInPerAddress != 1000 {
		t.Errorf("DATACHAT_SESSION_IDLE=12h, DATACHAT_SIGNIN_PER_USER=0, DATACHAT_SIGNIN_PER_ADDRESS=1_000: got %+v, %v", c, err)
	}
	if c.BodyReadTimeout != 30*time.Second || c.BodyMinBytes != 64<<10 {
		t.Errorf("got body pace %v %d", c.BodyReadTimeout, c.BodyMinBytes)
	}
	if got := c.Provider(func(string) bool { return false }); got != "" {
		t.Errorf("provider: got %q, want none", got)
	}
	if got, want := c.Model(Gemini), "gemini-2.5-flash"; got != want {
		t.Errorf("model: got %q, want %q", got, want)
	}
	if got, want := c.Window(Gemini), 1_048_576; got != want {
		t.Errorf("window: got %d, want %d", got, want)
	}
}

func TestDefaultDataDir(t *testing.T) {
	for _, tc := range []struct {
		goos string
		env  map[string]string
		want string // "" means an error
	}{
		{"linux", map[string]string{"HOME": "/home/ann"}, "/home/ann/.local/share/datachat"},
		{"linux", map[string]string{"HOME": "/home/ann", "XDG_DATA_HOME": "/data/ann"}, "/data/ann/datachat"},
		{"freebsd", map[string]string{"HOME": "/home/ann", "XDG_DATA_HOME": "share"}, "/home/ann/.local/share/datachat"}, // a relative XDG_DATA_HOME is ignored
		{"linux", map[string]string{"XDG_DATA_HOME": "/data/ann"}, "/data/ann/datachat"},
		{"linux", map[string]string{}, ""},
		{"darwin", map[string]string{"HOME": "/Users/ann", "XDG_DATA_HOME": "/data/ann"}, "/Users/ann/Library/Application Support/datachat"},
		{"darwin", map[string]string{}, ""},
		{"windows", map[string]string{"LocalAppData": `C:\Users\ann\AppData\Local`}, filepath.Join(`C:\Users\ann\AppData\Local`, "datachat")},
		{"windows", map[string]string{"HOME": "/home/ann"}, ""},
	} {
		lookup := func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
		got, err := defaultDataDir(tc.goos, lookup)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("%s %v: got %q, want an error", tc.goos, tc.env, got)
		case tc.want != "" && (err != nil || got != tc.want):
			t.Errorf("%s %v: got %q, %v; want %q", tc.goos, tc.env, got, err, tc.want)
		}
	}
}

func TestDataDir(t *testing.T) {
	// Given, it is made absolute: the same directory for every command
	// started in this one.
	c, err := Load("", env(map[string]string{"DATACHAT_DATA_DIR": "rel/data"}))
	if err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	if want := filepath.Join(wd, "rel", "data"); c.DataDir != want || !c.DataDirSet {
		t.Errorf("relative DATACHAT_DATA_DIR: got %q (set %v), want %q", c.DataDir, c.DataDirSet, want)
	}
	// Not given and no home to put the default in: the error says to set it.
	none := func(string) (string, bool) { return "", false }
	if _, err := Load("", none); err == nil || !strings.Contains(err.Error(), "set DATACHAT_DATA_DIR") {
		t.Errorf("no HOME: got %v, want an error saying to set DATACHAT_DATA_DIR", err)
	}
	if c, err := Load("", env(map[string]string{"DATACHAT_LOG_LEVEL": "info", "DATACHAT_LOG_FORMAT": "json"})); err != nil || !c.LogLevelSet || !c.LogFormatSet {
		t.Errorf("log level and format given: got %+v, %v", c, err)
	}
}

func TestBadValuesNameTheVariable(t *testing.T) {
	tests := []struct{ key, val string }{
		{"DATACHAT_ADDR", "nonsense"},
		{"DATACHAT_ADDR", "127.0.0.1:99999"},
		{"DATACHAT_DATABASE_URL", "mysql://x"},
		{"LLM_PROVIDER", "claude"},
		{"CHAT_TEMPERATURE", "3"},
		{"CHAT_MAX_TOKENS", "many"},
		{"CHAT_ENABLE_STREAMING", "yes"},
		{"CHAT_RESPONSE_FORMAT", "json"},
		{"DATACHAT_QUERY_TIMEOUT", "30"},
		{"DATACHAT_QUERY_MEMORY", "lots"},
		{"DATACHAT_MAX_DATASET_BYTES", "5XB"},
		{"DATACHAT_ALLOW_PRIVATE_URLS", "127.0.0.1/99"},
		{"DATACHAT_CONFIRM_SQL", "never"},
		{"DATACHAT_LOG_LEVEL", "loud"},
		{"DATACHAT_LOG_FORMAT", "xml"},
		{"OPENAI_BASE_URL", "ftp://x"},
		{"DATACHAT_SQL_RPM", "-1"},
		{"DATACHAT_SQL_RPM", "lots"},
		{"DATACHAT_SEARCH_RPM", "1.5"},
		{"DATACHAT_UPLOADS_PER_HOUR", "-5"},
		{"DATACHAT_MAX_WS_PER_USER", "many"},
		{"DATACHAT_WS_PING_INTERVAL", "20"},
		{"DATACHAT_WS_PING_INTERVAL", "0s"},
		{"DATACHAT_WS_PING_TIMEOUT", "-1s"},
		{"DATACHAT_WS_PING_TIMEOUT", "1ms"},
		{"DATACHAT_WS_OUTBOX_BYTES", "1KiB"},
		{"DATACHAT_WS_OUTBOX_BYTES", "lots"},
		{"DATACHAT_WRITE_TIMEOUT", "10"},
		{"DATACHAT_WRITE_TIMEOUT", "1ms"},
		{"DATACHAT_AUTH_CHECK_INTERVAL", "500"},
		{"DATACHAT_AUTH_CHECK_INTERVAL", "1ms"},
		{"DATACHAT_MAX_CONNECTIONS", "-1"},
		{"DATACHAT_BODY_READ_TIMEOUT", "30"},
		{"DATACHAT_BODY_READ_TIMEOUT", "10ms"},
		{"DATACHAT_BODY_MIN_BYTES", "0"},
		{"DATACHAT_BODY_MIN_BYTES", "fast"},
		{"DATACHAT_SESSION_IDLE", "7d"},
		{"DATACHAT_SESSION_IDLE", "30s"},
		{"DATACHAT_SESSION_IDLE", "-1h"},
		{"DATACHAT_SIGNIN_PER_USER", "-1"},
		{"DATACHAT_SIGNIN_PER_USER", "ten"},
		{"DATACHAT_SIGNIN_PER_ADDRESS", "1.5"},
	}
	for _, tt := range tests {
		t.Run(tt.key+"="+tt.val, func(t *testing.T) {
			_, err := Load("", env(map[string]string{tt.key: tt.val}))
			if err == nil {
				t.Fatalf("got no error")
			}
			if !strings.Contains(err.Error(), tt.key) || !strings.Contains(err.Error(), "accepts") {
				t.Errorf("got %q, want it to name %s and what it accepts", err, tt.key)
			}
		})
	}
}

func TestValues(t *testing.T) {
	c, err := Load("", env(map[string]string{
		"DATACHAT_ADDR":               ":0",
		"DATACHAT_DATABASE_URL":       "postgres://u@127.0.0.1:5433/db",
		"DATACHAT_QUERY_MEMORY":       "512MiB",
		"DATACHAT_MAX_DATASET_BYTES":  "1GB",
		"DATACHAT_ALLOW_PRIVATE_URLS": "127.0.0.1/32, 10.0.0.0/8",
		"CHAT_ALLOWED_METADATA_KEYS":  "author, year,,",
		"OPENAI_API_KEY":              "sk-x",
		"OLLAMA_NUM_CTX":              "8192",
		"CHAT_ENABLE_STREAMING":       "0",
		"DATACHAT_LOG_LEVEL":          "debug",
		"DATACHAT_SQL_RPM":            "0",
		"DATACHAT_SEARCH_RPM":         "30",
		"DATACHAT_UPLOADS_PER_HOUR":   "1_000",
		"DATACHAT_MAX_WS_PER_USER":    "0",
		"DATACHAT_MAX_CONNECTIONS":    "100",
		"DATACHAT_BODY_READ_TIMEOUT":  "2m",
		"DATACHAT_BODY_MIN_BYTES":     "1KiB",
		"DATACHAT_WS_PING_INTERVAL":   "1m",
		"DATACHAT_WS_PING_TIMEOUT":    "500ms",
		"DATACHAT_WS_OUTBOX_BYTES":    "4MiB",
		"DATACHAT_WRITE_TIMEOUT":      "30s",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.QueryMemory != 512<<20 || c.MaxDatasetBytes != 1e9 {
		t.Errorf("sizes: got %d %d", c.QueryMemory, c.MaxDatasetBytes)
	}
	if c.AllowPrivateAll || fmt.Sprint(c.AllowPrivateCIDRs) != "[127.0.0.1/32 10.0.0.0/8]" {
		t.Errorf("allow private: got %v %v", c.AllowPrivateAll, c.AllowPrivateCIDRs)
	}
	if got := strings.Join(c.AllowedMetadataKeys, "|"); got != "author|year" {
		t.Errorf("metadata keys: got %q", got)
	}
	if got := c.Provider(nil); got != OpenAI {
		t.Errorf("provider: got %q, want openai", got)
	}
	if got := c.Model(OpenAI); got != "gpt-4o-mini" {
		t.Errorf("model: got %q", got)
	}
	if got := c.Window(Ollama); got != 8192 {
		t.Errorf("ollama window: got %d", got)
	}
	if c.EnableStreaming {
		t.Errorf("streaming: got true")
	}
	if c.SQLRPM != 0 || c.SearchRPM != 30 || c.UploadsPerHour != 1000 || c.MaxWSPerUser != 0 || c.MaxConnections != 100 {
		t.Errorf("budgets: got sql %d search %d uploads %d ws %d conns %d", c.SQLRPM, c.SearchRPM, c.UploadsPerHour, c.MaxWSPerUser, c.MaxConnections)
	}
	if c.BodyReadTimeout != 2*time.Minute || c.BodyMinBytes != 1024 {
		t.Errorf("body pace: got %v %d", c.BodyReadTimeout, c.BodyMinBytes)
	}
	if c.WSPingInterval != time.Minute || c.WSPingTimeout != 500*time.Millisecond {
		t.Errorf("WebSocket pings: got every %v, answered within %v", c.WSPingInterval, c.WSPingTimeout)
	}
	if c.WSOutboxBytes != 4<<20 || c.WriteTimeout != 30*time.Second {
		t.Errorf("slow clients: got an outbox of %d bytes, writes within %v", c.WSOutboxBytes, c.WriteTimeout)
	}
}

func TestFileAndEnvPrecedence(t *testing.T) {
	path := filepath.Join(t.TempDir(), "datachat.yaml")
	yaml := "DATACHAT_ADDR: 127.0.0.1:9090\ndatachat_data_dir: /tmp/x\nCHAT_ALLOWED_METADATA_KEYS: [a, b]\nCHAT_MAX_TOKENS: 100\nDATACHAT_SQL_RPM: 10\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path, env(map[string]string{"CHAT_MAX_TOKENS": "200"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != "127.0.0.1:9090" || c.DataDir != "/tmp/x" || len(c.AllowedMetadataKeys) != 2 {
		t.Errorf("from file: got %q %q %v", c.Addr, c.DataDir, c.AllowedMetadataKeys)
	}
	if c.ChatMaxTokens != 200 {
		t.Errorf("env should win: got %d, want 200", c.ChatMaxTokens)
	}
	if c.SQLRPM != 10 {
		t.Errorf("DATACHAT_SQL_RPM from the file: got %d, want 10", c.SQLRPM)
	}

	if err := os.WriteFile(path, []byte("NOT_A_KEY: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path, env(nil)); err == nil || !strings.Contains(err.Error(), "NOT_A_KEY") {
		t.Errorf("unknown key: got %v", err)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"1024": 1024, "512MiB": 512 << 20, "1GB": 1e9, "2GiB": 2 << 30, "1.5KiB": 1536, "10 kb": 10000} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q): got %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MiB", "1XB", "-1"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q): got no error", in)
		}
	}
}

func TestRetrievalBackendsNameWhatTheyNeed(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string // "" means valid
	}{
		{map[string]string{"DATACHAT_RETRIEVAL": "chroma"}, "DATACHAT_RETRIEVAL=chroma needs CHROMA_URL"},
		{map[string]string{"DATACHAT_RETRIEVAL": "chroma", "CHROMA_URL": "http://127.0.0.1:8000"}, "DATACHAT_RETRIEVAL=chroma needs EMBEDDING_PROVIDER"},
		{map[string]string{"DATACHAT_RETRIEVAL": "chroma", "CHROMA_URL": "http://127.0.0.1:8000", "EMBEDDING_PROVIDER": "ollama"}, ""},
		{map[string]string{"DATACHAT_RETRIEVAL": "postgres"}, "DATACHAT_RETRIEVAL=postgres needs DATACHAT_DATABASE_URL=postgres://"},
		{map[string]string{"DATACHAT_RETRIEVAL": "postgres", "DATACHAT_DATABASE_URL": "postgres://u@127.0.0.1/db"}, ""},
		{map[string]string{"DATACHAT_RETRIEVAL": "bleve"}, "DATACHAT_RETRIEVAL"},
	} {
		_, err := Load("", env(tc.env))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.env, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: got %v, want an error containing %q", tc.env, err, tc.want)
		}
	}
}
func TestParseAllowPrivate(t *testing.T) {
	for _, c := range []struct {
		in   string
		all  bool
		nets string
		bad  bool
	}{
		{"true", true, "", false},
		{"1", true, "", false},
		{"false", false, "", false},
		{"", false, "", false},
		{"127.0.0.1/32", false, "127.0.0.1/32", false},
		{"127.0.0.1/32, 10.0.0.0/8", false, "127.0.0.1/32 10.0.0.0/8", false},
		{"::1", false, "::1/128", false},
		{"yes please", false, "", true},
	} {
		all, nets, err := ParseAllowPrivate(c.in)
		var got []string
		for _, n := range nets {
			got = append(got, n.String())
		}
		if all != c.all || strings.Join(got, " ") != c.nets || (err != nil) != c.bad {
			t.Errorf("%q: got %v %v %v", c.in, all, got, err)
		}
	}
}

// TestREADMEListsEveryVariable: the variables are those Load reads, and the
// README's table documents each of them, no more and no fewer.
func TestREADMEListsEveryVariable(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	row := regexp.MustCompile("^\\| (`[A-Z][A-Z0-9_]+`(?:, `[A-Z][A-Z0-9_]+`)*) \\|")
	name := regexp.MustCompile("`([A-Z][A-Z0-9_]+)`")
	for _, line := range strings.Split(string(b), "\n") {
		if m := row.FindStringSubmatch(line); m != nil {
			for _, n := range name.FindAllStringSubmatch(m[1], -1) {
				documented[n[1]] = true
			}
		}
	}
	asked := map[string]bool{}
	if _, err := Load("", func(k string) (string, bool) {
		asked[k] = true
		if k == "DATACHAT_DATA_DIR" {
			return t.TempDir(), true
		}
		return "", false
	}); err != nil {
		t.Fatal(err)
	}
	// Where the data directory defaults to, not datachat's own settings.
	for _, k := range []string{"HOME", "XDG_DATA_HOME", "LocalAppData"} {
		delete(asked, k)
	}
	for k := range asked {
		if !documented[k] {
			t.Errorf("%s is read by Load but not in the README's table of variables", k)
		}
	}
	for k := range documented {
		if !asked[k] {
			t.Errorf("the README documents %s, which Load does not read", k)
		}
	}
}

// TestHostileConfig: a --config file or a DATACHAT_SOURCES value built to
// exhaust the YAML reader stops start-up at once with the limit it passed.
func TestHostileConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "datachat.yaml")
	for _, tc := range []struct{ name, file, want string }{
		{"merge keys", "DATACHAT_ADDR: 127.0.0.1:9090\nx:\n" + strings.ReplaceAll("\n"+testfiles.YAMLMerges(20, 9), "\n", "\n  "), "merge keys"},
		{"laughs into DATACHAT_SOURCES", testfiles.YAMLLaughs(9, 9) + "DATACHAT_SOURCES: [*a8]\n", "aliases"},
		{"deep", "DATACHAT_ADDR: " + strings.Repeat("[", 40_000) + strings.Repeat("]", 40_000) + "\n", "nests more than 64 levels deep"},
	} {
		if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(path, env(nil)); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "--config "+path) {
			t.Errorf("%s: got %v, want --config %s refused for %q", tc.name, err, path, tc.want)
		}
	}
	_, err := Load("", env(map[string]string{"DATACHAT_SOURCES": testfiles.YAMLMerges(20, 9)}))
	if err == nil || !strings.Contains(err.Error(), "DATACHAT_SOURCES is not valid") || !strings.Contains(err.Error(), "the value is not shown") {
		t.Errorf("DATACHAT_SOURCES: %v", err)
	}
}
