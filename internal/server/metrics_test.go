package server

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"datachat/internal/llmtest"
)

// scrape reads /metrics with alice's key.
func (ts *testServer) scrape(t *testing.T) string {
	t.Helper()
	req, _ := http.NewRequest("GET", ts.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+ts.alice)
	st, b, _ := send(t, req)
	if st != 200 {
		t.Fatalf("/metrics: %d %s", st, b)
	}
	return b
}

// metricValue sums the samples of a metric whose labels include all of
// labels (each `name="value"`); 0 if there are none.
func metricValue(body, name string, labels ...string) float64 {
	var sum float64
	for _, line := range strings.Split(body, "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		match := true
		for _, l := range labels {
			match = match && strings.Contains(rest, l)
		}
		if !match {
			continue
		}
		f := strings.Fields(rest)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}

func grepLines(body, s string) string {
	var out []string
	for _, line := range strings.Split(body, "\n") {
		if strings.Contains(line, s) && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

func TestMetricsNeedAKey(t *testing.T) {
	ts := newTestServer(t)
	ts.run(t, scenario{name: "no key", method: "GET", url: "/metrics", wantStatus: 401, wantContent: []string{`"type":"unauthorized"`}})
	ts.run(t, scenario{name: "with key", method: "GET", url: "/metrics", headers: map[string]string{"X-API-Key": ts.alice}, wantStatus: 200,
		wantContent: []string{"# TYPE datachat_http_requests_total counter", "datachat_websocket_sessions 0", "datachat_sql_queue_depth 0",
			"datachat_sql_running_queries 0", "go_goroutines", "process_resident_memory_bytes"}})
	// Requests are counted by route pattern, not path, so ids never become
	// labels; unmatched requests share one label.
	ts.run(t, scenario{name: "unmatched", method: "GET", url: "/nowhere/123", wantStatus: 404})
	ts.run(t, scenario{name: "a conversation", method: "GET", url: "/api/conversations/abc", headers: map[string]string{"X-API-Key": ts.alice}, wantStatus: 404})
	m := ts.scrape(t)
	for _, c := range []struct {
		labels []string
		want   float64
	}{
		{[]string{`route="unmatched"`, `status="404"`}, 1},
		{[]string{`route="GET /api/conversations/{id}"`, `status="404"`}, 1},
		{[]string{`route="GET /metrics"`, `status="401"`}, 1},
		{[]string{`route="GET /metrics"`, `status="200"`}, 1},
	} {
		if got := metricValue(m, "datachat_http_requests_total", c.labels...); got != c.want {
			t.Errorf("requests %v: got %v, want %v\n%s", c.labels, got, c.want, grepLines(m, "datachat_http_requests_total"))
		}
	}
	if strings.Contains(m, "/nowhere") || strings.Contains(m, "/abc") {
		t.Errorf("paths leaked into labels:\n%s", grepLines(m, "datachat_http"))
	}
}

func TestMetricsOfAChatTurn(t *testing.T) {
	cs := newObservedChatServer(t, llmtest.Ollama, sqlTurns(1))
	conv := cs.withPenguins(t)
	c := cs.dial(t, conv, cs.alice)
	// An answer from the session: it is counted by then.
	c.send("hello", map[string]any{})
	c.until("chat_error")
	if m := cs.scrape(t); metricValue(m, "datachat_websocket_sessions") != 1 {
		t.Errorf("open sessions: %s", grepLines(m, "websocket_sessions"))
	}
	c.ask("How many Adelie penguins?")
	// Queries sent to the API are timed too, under their own source.
	sqlURL := "/api/conversations/" + conv + "/sql"
	for _, body := range []string{`{"query":"SELECT count(*) FROM penguins"}`, `{"query":"SELECT count(*) FROM penguins","keep":true}`, `{"query":"SELECT nope FROM penguins"}`} {
		cs.post(t, sqlURL, cs.alice, body)
	}
	m := cs.scrape(t)
	for _, x := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"datachat_tool_calls_total", []string{`source="chat"`, `tool="execute_sql"`, `outcome="ok"`}, 1},
		{"datachat_sql_query_duration_seconds_count", []string{`source="chat"`}, 1},
		{"datachat_sql_query_duration_seconds_count", []string{`source="api"`, `outcome="ok"`}, 2},
		{"datachat_sql_query_duration_seconds_count", []string{`source="api"`, `outcome="error"`}, 1},
		{"datachat_chat_turn_duration_seconds_count", []string{`status="complete"`}, 1},
		{"datachat_chat_time_to_first_token_seconds_count", nil, 1},
		{"datachat_tokens_total", []string{`provider="ollama"`, `direction="input"`}, 300},
		{"datachat_tokens_total", []string{`provider="ollama"`, `direction="output"`}, 30},
		{"datachat_http_requests_total", []string{`route="POST /api/conversations/{id}/datasets"`, `status="201"`}, 1},
	} {
		if got := metricValue(m, x.name, x.labels...); got != x.want {
			t.Errorf("%s%v: got %v, want %v\n%s", x.name, x.labels, got, x.want, grepLines(m, x.name))
		}
	}
	c.conn.CloseNow()
	cs.wsWG.Wait() // the session has ended, and is no longer counted
	m = cs.scrape(t)
	if metricValue(m, "datachat_websocket_sessions") != 0 {
		t.Errorf("sessions after close: %s", grepLines(m, "websocket_sessions"))
	}
	// The request is counted once its handler has returned, just after the
	// session ended: wait for it a moment.
	for deadline := time.Now().Add(5 * time.Second); ; {
		got := metricValue(m, "datachat_http_requests_total", `route="GET /ws"`, `status="101"`)
		if got == 1 {
			break
		}
		if got > 1 || time.Now().After(deadline) {
			t.Fatalf("the WebSocket request: %s", grepLines(m, "GET /ws"))
		}
		time.Sleep(10 * time.Millisecond)
		m = cs.scrape(t)
	}
}
