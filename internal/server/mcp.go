package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"datachat"
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
				Budgets: &s.budgets, SaveAsMaxRows: s.saveAsMaxRows(),
			})
			m.srv.AddReceivingMiddleware(m.bindToRequest)
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
		// The SDK ends its response as soon as the request's context ends,
		// even with a call still running, whose answer the client then never
		// gets; and it runs calls under a context that never ends. So it gets
		// a context that does not end, and each call is bound to the
		// request's instead (bindToRequest): a call whose client is gone, or
		// whose key was revoked, stops, and the SDK's response ends once it
		// has answered.
		if r.Method == http.MethodPost && !s.mcpReadable(w, r) {
			return
		}
		m := &mcpServerMemo{request: r.Context()}
		h.ServeHTTP(w, r.WithContext(context.WithValue(context.WithoutCancel(r.Context()), mcpServerKey{}, m)))
	}
}

// maxMCPBody caps a POST to /mcp: the SDK's own cap on a message.
const maxMCPBody = mcp.DefaultMaxLineLength

// mcpReadable reads a POST's body and, when it is not JSON or not a JSON-RPC
// message, answers 400 with the JSON-RPC error (-32700 or -32600) that the
// SDK would have answered in plain text; else it puts the body back for the
// SDK and reports true.
func (s *Server) mcpReadable(w http.ResponseWriter, r *http.Request) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxMCPBody))
	var e *mcpserver.MessageError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		e = &mcpserver.MessageError{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf("Invalid Request: the body is larger than %d bytes", mbe.Limit)}
	case err != nil:
		s.error(w, r, datachat.WrapError(datachat.EINVALID, "The request body could not be read.", err))
		return false
	default:
		e = mcpserver.CheckMessage(body)
	}
	if e != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		w.Write(e.JSON())
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return true
}

// mcpServerMemo holds the MCP server built for one request.
type mcpServerMemo struct {
	once    sync.Once
	srv     *mcp.Server
	request context.Context // the HTTP request's
}

// mcpCodeRevoked is the JSON-RPC error code (in the range JSON-RPC leaves to
// servers) of a call ended because its credential was revoked.
const mcpCodeRevoked = -32001

// bindToRequest runs each method of the request's MCP session under a
// context that ends with the HTTP request's; a call ended by the revocation
// of its credential answers a JSON-RPC error saying so.
func (m *mcpServerMemo) bindToRequest(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		stop := context.AfterFunc(m.request, func() { cancel(context.Cause(m.request)) })
		defer stop()
		res, err := next(ctx, method, req)
		if rev := revocation(m.request); rev != nil {
			return nil, &jsonrpc.Error{Code: mcpCodeRevoked, Message: datachat.ErrorMessage(rev)}
		}
		return res, err
	}
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

// saveAsMaxRows caps MCP execute_sql's save_as as the chat's
// (DATACHAT_SAVE_AS_MAX_ROWS).
func (s *Server) saveAsMaxRows() int {
	if s.Chat == nil {
		return 0
	}
	return s.Chat.SaveAsMaxRows
}
