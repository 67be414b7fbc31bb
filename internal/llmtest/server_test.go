package llmtest

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestParseScript(t *testing.T) {
	s, err := LoadScript("testdata/chat_script.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Turns) != 2 || s.Default == nil || time.Duration(s.Default.Delay) != 5*time.Millisecond || s.EmbeddingDim != 16 {
		t.Fatalf("got %+v", s)
	}
	if !JSONEqual(s.Turns[0].ToolCalls[0].Args, []byte(`{"query":"SELECT count(*) AS n FROM sales"}`)) {
		t.Errorf("args: %s", s.Turns[0].ToolCalls[0].Args)
	}
	// Round trip: a Go script marshals to a file that parses back the same.
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseScript(b)
	if b2, _ := json.Marshal(back); err != nil || string(b2) != string(b) {
		t.Errorf("round trip: %v\n%s\n%s", err, b, b2)
	}
	for _, bad := range []string{
		`{"turns":[{"txt":["typo"]}]}`,
		`{"turns":[{"fault":{"kind":"explode"}}]}`,
		`{"turns":[{"tool_calls":[{"args":{}}]}]}`,
		`{"default":{"delay":"soon"}}`,
	} {
		if _, err := ParseScript([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

func chat(t *testing.T, srv *Server, body string) string {
	t.Helper()
	_, b := post(t, srv.URL+"/api/chat", body)
	var text strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var l olLine
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		text.WriteString(l.Message.Content)
		for _, c := range l.Message.ToolCalls {
			text.WriteString("<call " + c.Function.Name + " " + string(c.Function.Arguments) + ">")
		}
	}
	return text.String()
}

func TestTurnsMatchAndDefault(t *testing.T) {
	s, err := LoadScript("testdata/chat_script.json")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(t, Ollama, s)
	toolResult := `{"model":"m","messages":[{"role":"user","content":"how many?"},{"role":"assistant","content":"","tool_calls":[{"function":{"name":"execute_sql","arguments":{"query":"x"}}}]},{"role":"tool","content":"{\"rows\":[[4217]]}","tool_name":"execute_sql"}]}`
	// The tool-result turn is second in the script but matches first.
	if got := chat(t, srv, toolResult); got != "There are 4217 sales." {
		t.Errorf("tool result turn: got %q", got)
	}
	if got := chat(t, srv, `{"model":"m","messages":[{"role":"user","content":"how many?"}]}`); got != `Let me count them.<call execute_sql {"query":"SELECT count(*) AS n FROM sales"}>` {
		t.Errorf("first turn: got %q", got)
	}
	for i := 0; i < 2; i++ {
		if got := chat(t, srv, `{"model":"m","messages":[{"role":"user","content":"hello there"}]}`); got != "You said: hello there" {
			t.Errorf("default: got %q", got)
		}
	}
	reqs := srv.ChatRequests()
	if len(reqs) != 4 || reqs[0].Turn != 1 || reqs[1].Turn != 0 || reqs[2].Turn != -1 {
		t.Errorf("turns used: %+v", reqs)
	}
	if r := reqs[0]; r.LastToolResult() != `{"rows":[[4217]]}` || r.LastUser() != "how many?" || len(r.ToolResults()) != 1 || r.Messages[1].ToolCalls[0].Name != "execute_sql" {
		t.Errorf("parsed request: %+v", r)
	}
}

func TestScriptExhausted(t *testing.T) {
	srv := NewServer(t, OpenAI, Script{Turns: []Turn{Texts("only once")}})
	post(t, srv.URL+"/chat/completions", `{"stream":true}`)
	resp, body := post(t, srv.URL+"/chat/completions", `{"stream":true}`)
	if resp.StatusCode != 500 || !strings.Contains(string(body), "no turn left for request 1") {
		t.Errorf("got %d %s", resp.StatusCode, body)
	}
}

func TestReplyFuncAndTemplateErrors(t *testing.T) {
	srv := NewServer(t, Ollama, Script{Turns: []Turn{
		{ReplyFunc: func(r *Request) string { return fmt.Sprintf("%d messages", len(r.Messages)) }},
		{Reply: "{{.NoSuchField}}"},
	}})
	if got := chat(t, srv, `{"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]}`); got != "2 messages" {
		t.Errorf("ReplyFunc: got %q", got)
	}
	resp, body := post(t, srv.URL+"/api/chat", `{"messages":[]}`)
	if resp.StatusCode != 500 || !strings.Contains(string(body), "reply template") {
		t.Errorf("bad template: got %d %s", resp.StatusCode, body)
	}
}

func TestField(t *testing.T) {
	doc := `{"columns":[{"name":"n"}],"rows":[[4217, 1.5e3, "x", null, [1,2]]],"row_count":1}`
	for path, want := range map[string]string{
		"rows.0.0": "4217", "rows.0.1": "1.5e3", "rows.0.2": "x", "rows.0.3": "", "rows.0.4": "[1,2]",
		"columns.0.name": "n", "row_count": "1", "rows.9.0": "", "nope": "",
	} {
		if got := Field(doc, path); got != want {
			t.Errorf("%s: got %q, want %q", path, got, want)
		}
	}
	if Field("not json", "a") != "" {
		t.Error("Field on bad JSON")
	}
}

func TestWords(t *testing.T) {
	for _, text := range []string{"There are 4217 sales.", "  lead and trail  ", "", "one", "a\n\nb"} {
		if got := strings.Join(words(text), ""); got != text {
			t.Errorf("%q: chunks rejoin to %q", text, got)
		}
	}
	if got := words("There are 42."); !reflect.DeepEqual(got, []string{"There", " are", " 42."}) {
		t.Errorf("got %q", got)
	}
}

func TestVector(t *testing.T) {
	cos := func(a, b []float32) float64 {
		var s float64
		for i := range a {
			s += float64(a[i]) * float64(b[i])
		}
		return s
	}
	a, b, c := Vector("revenue by region 2024", 64), Vector("Revenue by REGION", 64), Vector("the refund policy for damaged goods", 64)
	if n := cos(a, a); math.Abs(n-1) > 1e-5 {
		t.Errorf("not normalized: |v|² = %v", n)
	}
	if cos(a, b) <= cos(a, c) {
		t.Errorf("similar texts are not closer: %v vs %v", cos(a, b), cos(a, c))
	}
	if !reflect.DeepEqual(Vector("x y", 8), Vector("x y", 8)) {
		t.Error("not deterministic")
	}
	if e := Vector("!!!", 4); e[0] != 1 {
		t.Errorf("no words: %v", e)
	}
}

func TestStampTime(t *testing.T) {
	srv := NewServer(t, OpenAI, Script{StampTime: true, Turns: []Turn{Texts("a", "b")}})
	before := time.Now()
	_, body := post(t, srv.URL+"/chat/completions", `{"stream":true}`)
	text := strings.Join(contentDeltas(t, body), "")
	times, rest := Stamps(text)
	if rest != "ab" || len(times) != 2 {
		t.Fatalf("got %q, %v", rest, times)
	}
	for _, ts := range times {
		if ts.Before(before.Add(-time.Second)) || ts.After(time.Now()) {
			t.Errorf("stamp %v out of range", ts)
		}
	}
	if _, rest, ok := ParseStamp("[ts:12]x"); !ok || rest != "x" {
		t.Errorf("ParseStamp: %q %v", rest, ok)
	}
	if _, rest := Stamps("no [ts: stamp] here"); rest != "no [ts: stamp] here" {
		t.Errorf("Stamps changed text without stamps: %q", rest)
	}
}

// ReadStampedStream finds each text delta's stamp, and its latency is
// the time since the fake wrote it.
func TestReadStampedStream(t *testing.T) {
	srv := NewServer(t, OpenAI, Script{StampTime: true, Turns: []Turn{Texts("a", "b", "c")}})
	before := time.Now()
	resp, err := http.Post(srv.URL+"/chat/completions", "application/json", strings.NewReader(`{"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var lat []time.Duration
	ReadStampedStream(resp.Body, func(d time.Duration) { lat = append(lat, d) })
	if len(lat) != 3 {
		t.Fatalf("got %d latencies, want 3: %v", len(lat), lat)
	}
	for _, d := range lat {
		if d < 0 || d > time.Since(before) {
			t.Errorf("latency %v outside [0, %v]", d, time.Since(before))
		}
	}
}

func TestWholeAnswers(t *testing.T) {
	t.Run("gemini generateContent", func(t *testing.T) {
		srv := NewServer(t, Gemini, Script{Turns: []Turn{Texts("Hi", " there")}})
		_, body := post(t, srv.URL+"/v1beta/models/gemini-2.5-flash:generateContent", `{"contents":[]}`)
		var r struct {
			Candidates []struct {
				Content struct{ Parts []struct{ Text string } }
			}
		}
		if err := json.Unmarshal(body, &r); err != nil || r.Candidates[0].Content.Parts[0].Text != "Hi there" {
			t.Errorf("got %s (%v)", body, err)
		}
	})
	t.Run("ollama stream false", func(t *testing.T) {
		srv := NewServer(t, Ollama, Script{Turns: []Turn{Texts("Hi", " there")}})
		_, body := post(t, srv.URL+"/api/chat", `{"stream":false}`)
		var l olLine
		if err := json.Unmarshal(body, &l); err != nil || l.Message.Content != "Hi there" || !l.Done {
			t.Errorf("got %s (%v)", body, err)
		}
	})
}

func TestOtherEndpoints(t *testing.T) {
	o := NewServer(t, Ollama, Script{Model: "qwen2.5"})
	for path, want := range map[string]string{"/": "Ollama is running", "/api/version": `"version"`, "/api/tags": `"name":"qwen2.5"`} {
		resp, err := http.Get(o.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if got := string(b); !strings.Contains(got, want) {
			t.Errorf("%s: got %q", path, got)
		}
	}
	oa := NewServer(t, OpenAI, Script{})
	resp, err := http.Get(oa.URL + "/models")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("models: %v %v", resp, err)
	}
	resp.Body.Close()
	resp, _ = http.Get(oa.URL + "/nowhere")
	if resp.StatusCode != 404 {
		t.Errorf("unknown path: %d", resp.StatusCode)
	}
	resp.Body.Close()
}

func TestAPIKeyPlaces(t *testing.T) {
	g := NewServer(t, Gemini, Script{APIKey: "k1", Default: &Turn{Text: []string{"ok"}}})
	resp, _ := post(t, g.URL+"/v1beta/models/m:streamGenerateContent?alt=sse&key=k1", `{}`)
	if resp.StatusCode != 200 {
		t.Errorf("?key=: %d", resp.StatusCode)
	}
	resp, body := post(t, g.URL+"/v1beta/models/m:streamGenerateContent?alt=sse", `{}`)
	if resp.StatusCode != 400 || !strings.Contains(string(body), "API_KEY_INVALID") {
		t.Errorf("no key: %d %s", resp.StatusCode, body)
	}
}

func TestConcurrentRequests(t *testing.T) {
	srv := NewServer(t, OpenAI, Script{Default: &Turn{Reply: "echo {{.LastUser}}"}})
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msg := fmt.Sprintf("m%d", i)
			_, body := post(t, srv.URL+"/chat/completions", `{"stream":true,"messages":[{"role":"user","content":"`+msg+`"}]}`)
			if got := strings.Join(contentDeltas(t, body), ""); got != "echo "+msg {
				t.Errorf("got %q", got)
			}
		}()
	}
	wg.Wait()
	if n := len(srv.ChatRequests()); n != 20 {
		t.Errorf("recorded %d requests", n)
	}
}

func TestCloseEndsStalls(t *testing.T) {
	srv, err := Start(Ollama, Script{Turns: []Turn{{Text: []string{"a"}, Fault: &Fault{Kind: FaultHang}}}}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		resp, err := http.Post(srv.URL+"/api/chat", "application/json", strings.NewReader("{}"))
		if err == nil {
			resp.Body.Close()
		}
	}()
	if err := srv.Wait(t.Context(), func(r []Request) bool { return len(r) > 0 }); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("Close waited for a stalled answer")
	}
}

func TestGeminiUsageGrows(t *testing.T) {
	srv := NewServer(t, Gemini, Script{Turns: []Turn{{Text: []string{"Let me ", "look."}, ToolCalls: []ToolCall{Call("execute_sql", `{"query":"SELECT 1"}`)}, Usage: &Usage{Input: 10, Output: 20}}}})
	_, body := post(t, srv.URL+"/v1beta/models/m:streamGenerateContent?alt=sse", `{}`)
	var counts []int64
	for _, ev := range strings.Split(strings.TrimSpace(string(body)), "\r\n\r\n") {
		var r gResponse
		if err := json.Unmarshal([]byte(strings.TrimPrefix(ev, "data: ")), &r); err != nil {
			t.Fatalf("%q: %v", ev, err)
		}
		counts = append(counts, r.UsageMetadata.CandidatesTokenCount)
	}
	if len(counts) != 3 || counts[0] >= counts[1] || counts[1] >= counts[2] || counts[2] != 20 {
		t.Errorf("candidatesTokenCount per event: %v, want growing to 20", counts)
	}
}
