package server

import (
	"context"
	"log/slog"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"datachat/internal/mcpserver"
)

// mcpHandler serves the MCP tools over streamable HTTP at /mcp, behind auth.
// It is stateless: every POST is a session of its own with a server acting for
// the request's user, so a request can never reach another key's session, and
// each tool names its conversation (conversation_id).
func (s *Server) mcpHandler() http.HandlerFunc {
	obs := s.Metrics.MCP()
	schemas := mcp.NewSchemaCache()
	sdkLog := slog.New(minLevel{s.Logger.Handler(), slog.LevelWarn})
	h := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		// The SDK asks twice per request; building a server costs ~0.2 ms.
		m, _ := r.Context().Value(mcpServerKey{}).(*mcpServerMemo)
		u := UserFrom(r.Context())
		if m == nil || u == nil {
			return nil
		}
		m.once.Do(func() {
			m.srv = mcpserver.New(mcpserver.Options{
				Workspace: s.Workspace, Store: s.Store, User: u, Sources: s.mcpSources(),
				Logger: s.logger(r), SDKLogger: sdkLog, Observer: obs, SchemaCache: schemas,
				Budget: s.mcpBudget(u.ID),
			})
		})
		return m.srv
	}, &mcp.StreamableHTTPOptions{
		Stateless: true,
		// Every request needs an API key, which a DNS-rebinding page cannot
		// have; the SDK's Host check would only refuse reverse proxies.
		DisableLocalhostProtection: true,
		Logger:                     sdkLog,
	})
	return func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), mcpServerKey{}, &mcpServerMemo{})))
	}
}

// mcpServerMemo holds the MCP server built for one request.
type mcpServerMemo struct {
	once sync.Once
	srv  *mcp.Server
}

type mcpServerKey struct{}

// minLevel drops records below a level: the SDK logs every session at info.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(attrs), h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.min}
}
