package server

import (
	"net/http"
	"time"

	"datachat/internal/chat"
	"datachat/internal/mcpserver"
	"datachat/internal/metrics"
)

var (
	_ chat.Observer      = (*metrics.ChatObserver)(nil)
	_ mcpserver.Observer = (*metrics.ToolObserver)(nil)
)

// addGauges adds gauges over the server's WebSocket sessions and the SQL
// engine's pool to its metrics.
func (s *Server) addGauges() {
	m := s.Metrics
	m.Gauge("datachat_websocket_sessions", "Open WebSocket chat sessions.", func() float64 {
		return float64(s.wsSessions.Load())
	})
	if s.Workspace != nil && s.Workspace.Engine != nil {
		e := s.Workspace.Engine
		m.Gauge("datachat_sql_queue_depth", "SQL queries waiting for a worker of the engine's pool.", func() float64 {
			q, _ := e.Load()
			return float64(q)
		})
		m.Gauge("datachat_sql_running_queries", "SQL queries running in the engine's pool.", func() float64 {
			_, n := e.Load()
			return float64(n)
		})
	}
}

// withMetrics counts each request by the route pattern that matched and the
// status it got. It reads the pattern from the request ServeMux handled, so it
// must wrap the mux with nothing between that replaces the request.
func (s *Server) withMetrics(next http.Handler) http.Handler {
	m := s.Metrics
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		status := sw.status
		if status == 0 {
			status = http.StatusOK
		}
		m.HTTPRequest(r.Pattern, status, time.Since(start))
	})
}

// serveMetrics answers GET /metrics in Prometheus's text format.
func (s *Server) serveMetrics() http.HandlerFunc {
	return s.Metrics.Handler().ServeHTTP
}
