package main

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"datachat/internal/llmtest"
)

// fake is the provider: llmtest's OpenAI fake behind a dispatcher that
// starts a new one every fakeGeneration requests. The fake keeps every
// request it answered, and requests carry the whole conversation, which
// grows with every turn; a fresh fake now and then keeps the harness's
// memory bounded over long runs.
type fake struct {
	url string
	srv *http.Server

	mu     sync.Mutex
	cur    *llmtest.Server
	served int
	all    []*llmtest.Server
}

const fakeGeneration = 200

// fakeScript answers a user message with execute_sql of the GROUP BY and a
// tool result with one line saying whether the query worked, so the harness
// can tell from the answer.
func fakeScript() llmtest.Script {
	s := llmtest.Script{Default: &llmtest.Turn{Text: []string{"script exhausted"}}}
	call := llmtest.Call("execute_sql", fmt.Sprintf(`{"query":%q}`, groupBy))
	for range fakeGeneration {
		s.Turns = append(s.Turns,
			llmtest.Turn{Match: &llmtest.Match{LastRole: "user"}, ToolCalls: []llmtest.ToolCall{call}},
			llmtest.Turn{Match: &llmtest.Match{LastRole: "tool"}, ReplyFunc: func(r *llmtest.Request) string {
				res := r.LastToolResult()
				first, _, _ := strings.Cut(res, "\n")
				switch {
				case strings.HasPrefix(res, "Error:"):
					return "sqlerror " + res
				case strings.Contains(res, fmt.Sprintf("(%d rows)", len(regions))):
					return "sqlok " + first
				}
				return "sqlodd " + res
			}},
		)
	}
	return s
}

func startFake() *fake {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fatalf("fake: %v", err)
	}
	f := &fake{url: "http://" + ln.Addr().String() + "/v1"}
	f.next()
	f.srv = &http.Server{Handler: f, ReadHeaderTimeout: 10 * time.Second}
	go f.srv.Serve(ln)
	return f
}

// next starts a new generation; f.mu is held or f is not yet shared.
func (f *fake) next() {
	s, err := llmtest.Start(llmtest.OpenAI, fakeScript(), "127.0.0.1:0")
	if err != nil {
		fatalf("fake: %v", err)
	}
	if old := f.cur; old != nil {
		// Its answers in flight take milliseconds (no delays in the script).
		time.AfterFunc(time.Minute, old.Close)
	}
	f.cur, f.served = s, 0
	f.all = append(f.all, s)
}

func (f *fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	if f.served >= fakeGeneration {
		f.next()
	}
	f.served++
	s := f.cur
	f.mu.Unlock()
	s.ServeHTTP(w, r)
}

func (f *fake) close() {
	f.srv.Close()
	f.mu.Lock()
	all := f.all
	f.mu.Unlock()
	for _, s := range all {
		s.Close()
	}
}
