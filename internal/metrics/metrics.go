// Package metrics holds datachat's Prometheus collectors, in a registry of
// their own (never the global default), and the small adapters through which
// the HTTP edge, the chat turn and the MCP tools report to them. The server
// serves [Metrics.Handler] at GET /metrics.
package metrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics is the set of collectors. Its methods are safe for concurrent use.
type Metrics struct {
	Registry *prometheus.Registry

	httpRequests   *prometheus.CounterVec
	httpDuration   *prometheus.HistogramVec
	turnDuration   *prometheus.HistogramVec
	firstToken     prometheus.Histogram
	toolCalls      *prometheus.CounterVec
	sqlDuration    *prometheus.HistogramVec
	providerErrors *prometheus.CounterVec
	tokens         *prometheus.CounterVec
}

// Sources of tool calls and SQL queries: the chat turn's model, an agent over
// MCP, or a client of the HTTP API (POST …/sql, the page's SQL console).
const (
	SourceChat = "chat"
	SourceMCP  = "mcp"
	SourceAPI  = "api"
)

// Buckets for LLM-bound latencies, which run from a fraction of a second to
// minutes.
var slowBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160}

// New returns the collectors registered in a new registry, with the Go runtime
// and process collectors beside them.
func New() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "datachat_http_requests_total",
			Help: "HTTP requests by route pattern (\"unmatched\" for none) and status code.",
		}, []string{"route", "status"}),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "datachat_http_request_duration_seconds",
			Help:    "Time to answer an HTTP request, by route pattern; streams and WebSocket sessions count until they end.",
			Buckets: prometheus.DefBuckets,
		}, []string{"route"}),
		turnDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "datachat_chat_turn_duration_seconds",
			Help:    "Duration of chat turns (or their continuation after a confirmation), by final message status.",
			Buckets: slowBuckets,
		}, []string{"status"}),
		firstToken: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "datachat_chat_time_to_first_token_seconds",
			Help:    "Time from the start of a chat turn to the first answer token from the model.",
			Buckets: slowBuckets,
		}),
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "datachat_tool_calls_total",
			Help: "Tool calls by source (chat: the model in a turn; mcp: an agent), tool and outcome (ok or error).",
		}, []string{"source", "tool", "outcome"}),
		sqlDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "datachat_sql_query_duration_seconds",
			Help:    "Duration of sandboxed SQL queries, queueing included, by source and outcome (ok or error).",
			Buckets: []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
		}, []string{"source", "outcome"}),
		providerErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "datachat_provider_errors_total",
			Help: "Failed LLM provider calls by kind (auth, rate_limited, unavailable, timeout, connection, …).",
		}, []string{"kind"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "datachat_tokens_total",
			Help: "LLM tokens recorded in token_usage, by provider, model and direction (input or output).",
		}, []string{"provider", "model", "direction"}),
	}
	m.Registry.MustRegister(
		m.httpRequests, m.httpDuration, m.turnDuration, m.firstToken, m.toolCalls,
		m.sqlDuration, m.providerErrors, m.tokens,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// Handler serves the registry in Prometheus's text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
}

// Gauge registers a gauge whose value is read from f at each scrape.
func (m *Metrics) Gauge(name, help string, f func() float64) {
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
}

// HTTPRequest counts an answered request. route is the ServeMux pattern that
// matched ("" for none).
func (m *Metrics) HTTPRequest(route string, status int, d time.Duration) {
	if route == "" {
		route = "unmatched"
	}
	m.httpRequests.WithLabelValues(route, strconv.Itoa(status)).Inc()
	m.httpDuration.WithLabelValues(route).Observe(d.Seconds())
}

func outcome(ok bool) string {
	if ok {
		return "ok"
	}
	return "error"
}

// Chat returns the observer of chat turns (a chat.Observer).
func (m *Metrics) Chat() *ChatObserver { return &ChatObserver{m: m} }

// MCP returns the observer of MCP tool calls (an mcpserver.Observer).
func (m *Metrics) MCP() *ToolObserver { return &ToolObserver{m: m, source: SourceMCP} }

// API returns the observer of SQL queries sent to the HTTP API.
func (m *Metrics) API() *ToolObserver { return &ToolObserver{m: m, source: SourceAPI} }

// ChatObserver reports what chat turns do.
type ChatObserver struct{ m *Metrics }

func (o *ChatObserver) TurnEnded(status string, d time.Duration) {
	o.m.turnDuration.WithLabelValues(status).Observe(d.Seconds())
}

func (o *ChatObserver) FirstToken(d time.Duration) { o.m.firstToken.Observe(d.Seconds()) }

func (o *ChatObserver) ToolCalled(tool string, ok bool, _ time.Duration) {
	o.m.toolCalls.WithLabelValues(SourceChat, tool, outcome(ok)).Inc()
}

func (o *ChatObserver) SQLQueried(ok bool, d time.Duration) {
	o.m.sqlDuration.WithLabelValues(SourceChat, outcome(ok)).Observe(d.Seconds())
}

func (o *ChatObserver) ProviderFailed(kind string) { o.m.providerErrors.WithLabelValues(kind).Inc() }

func (o *ChatObserver) TokensUsed(provider, model string, input, output int64) {
	if input > 0 {
		o.m.tokens.WithLabelValues(provider, model, "input").Add(float64(input))
	}
	if output > 0 {
		o.m.tokens.WithLabelValues(provider, model, "output").Add(float64(output))
	}
}

// ToolObserver reports tool calls and SQL queries made outside a chat turn.
type ToolObserver struct {
	m      *Metrics
	source string
}

func (o *ToolObserver) ToolCalled(tool string, ok bool, _ time.Duration) {
	o.m.toolCalls.WithLabelValues(o.source, tool, outcome(ok)).Inc()
}

func (o *ToolObserver) SQLQueried(ok bool, d time.Duration) {
	o.m.sqlDuration.WithLabelValues(o.source, outcome(ok)).Observe(d.Seconds())
}
