package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"

	"github.com/coder/websocket"

	"datachat/bench/internal/report"
	"datachat/bench/internal/serve"
	"datachat/internal/llm"
)

// The minimal relay: the least a server can do to carry these answers from
// the provider to the clients, in a process of its own as datachat's server
// is. Per turn it makes the same two streaming requests as datachat (the
// question, then the tool's result, when the fake calls a tool), and per
// chunk it reads the SSE event, decodes its JSON and writes one chat_token
// WebSocket message; it stores nothing, builds no prompt and checks nothing.
// Its latency over the baseline is what any relay adds on this machine, with
// these clients, the floor under datachat's.

// relayEnv, set to the fake's URL, makes this binary the relay.
const relayEnv = "BENCH_TOKENS_RELAY"

// relayMain serves the relay on 127.0.0.1 and prints its address.
func relayMain(upstream string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ln.Addr().String())
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024}}
	log.Fatal(http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer conn.CloseNow()
		for {
			if _, _, err := conn.Read(r.Context()); err != nil {
				return
			}
			if err := relayTurn(r.Context(), client, upstream, conn); err != nil {
				return
			}
		}
	})))
}

// relayTurn streams one turn: a first request, and a second with a tool
// result when the first answered with a tool call.
func relayTurn(ctx context.Context, client *http.Client, upstream string, conn *websocket.Conn) error {
	messages := []map[string]any{{"role": "user", "content": "Revenue by region?"}}
	for range 2 {
		call, err := relayStream(ctx, client, upstream, messages, conn)
		if err != nil {
			return err
		}
		if call == nil {
			break
		}
		messages = append(messages,
			map[string]any{"role": "assistant", "tool_calls": []any{call}},
			map[string]any{"role": "tool", "tool_call_id": call["id"], "content": "no documents"})
	}
	return conn.Write(ctx, websocket.MessageText, []byte(`{"type":"chat_complete","data":{"status":"complete"}}`))
}

// relayStream makes one streaming request and writes each text chunk as a
// chat_token message; it returns the tool call the answer made, if any.
func relayStream(ctx context.Context, client *http.Client, upstream string, messages []map[string]any, conn *websocket.Conn) (map[string]any, error) {
	body, _ := json.Marshal(map[string]any{"model": "m", "stream": true, "messages": messages})
	req, err := http.NewRequestWithContext(ctx, "POST", upstream+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	sse := llm.NewSSEReader(resp.Body)
	var call map[string]any
	for {
		data, err := sse.NextData()
		if err != nil {
			return call, nil
		}
		if bytes.Equal(data, []byte("[DONE]")) {
			return call, nil
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content   string           `json:"content"`
					ToolCalls []map[string]any `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if json.Unmarshal(data, &chunk) != nil || len(chunk.Choices) == 0 {
			continue
		}
		d := chunk.Choices[0].Delta
		if len(d.ToolCalls) > 0 && call == nil {
			call = d.ToolCalls[0]
		}
		if d.Content == "" {
			continue
		}
		ev, _ := json.Marshal(map[string]any{"type": "chat_token", "data": map[string]string{"token": d.Content}})
		if err := conn.Write(ctx, websocket.MessageText, ev); err != nil {
			return nil, err
		}
	}
}

// runRelay runs n conversations through a fresh relay process.
func runRelay(o options, n int) result {
	fake, err := startFake(o, n)
	if err != nil {
		log.Fatal(err)
	}
	defer fake.Close()
	self, err := os.Executable()
	if err != nil {
		log.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = []string{relayEnv + "=" + fake.URL, "PATH=" + os.Getenv("PATH")}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		log.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		log.Fatalf("relay: %v", err)
	}
	addr := strings.TrimSpace(line)

	r := result{loadAverage: report.LoadAvg()}
	pid := cmd.Process.Pid
	cpu0, self0 := serve.CPU(pid), serve.SelfCPU()
	convs, wall := driveWS(o, n, func(int) string { return "ws://" + addr + "/" }, nil)
	r.wall = wall
	r.serverCPU, r.harnessCPU = serve.CPU(pid)-cpu0, serve.SelfCPU()-self0
	collect(&r, convs)
	return r
}
