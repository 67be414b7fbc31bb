package main

// Stalled clients (-stalled S): S more conversations whose clients send a
// question and then never read, over a connection with a 4 KiB receive
// buffer, while the N normal clients run their turns. Each stalled
// question is answered at once with -stalled-kb KiB of text (8 KiB chunks,
// no pause), so the server holds back-pressured answers the whole run. A
// build's run with stalled clients is named NAME+stalled and runs beside
// NAME alone in the same round: the normal clients' first-token and
// per-token latencies, and the server's peak RSS, against the same build
// without them.

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"datachat/bench/internal/serve"
	"datachat/internal/llmtest"
)

const (
	stalledSuffix = "+stalled"
	readingSuffix = "+reading"
)

// extra says what the S extra clients of a run do.
type extra int

const (
	noExtra      extra = iota
	stalledExtra       // ask, then never read
	readingExtra       // ask, then read every frame (-stalled-control)
)

// extraClients splits a run's name into the build's and its extra clients.
func extraClients(what string) (string, extra) {
	if name, ok := strings.CutSuffix(what, stalledSuffix); ok {
		return name, stalledExtra
	}
	if name, ok := strings.CutSuffix(what, readingSuffix); ok {
		return name, readingExtra
	}
	return what, noExtra
}

// suffix is the name's suffix of a run with these extra clients.
func (e extra) suffix() string {
	return [...]string{"", stalledSuffix, readingSuffix}[e]
}

// stalledTurns are the fake's answers to the stalled questions, matched
// before the normal ones.
func stalledTurns(o options) []llmtest.Turn {
	n := max(1, o.stalledKB/8)
	text := make([]string, n)
	for i := range text {
		text[i] = strings.Repeat("x", 8<<10-1) + " "
	}
	turns := make([]llmtest.Turn, o.stalled)
	for i := range turns {
		turns[i] = llmtest.Turn{Match: &llmtest.Match{LastRole: "user", Contains: "[stalled]"}, Text: text, Delay: llmtest.Duration(time.Nanosecond)}
	}
	return turns
}

// stallClients opens one WebSocket per conversation, by hand over TCP with
// a 4 KiB receive buffer, sends a question on each and reads nothing more
// (or, if read, reads and drops every byte the server sends); close closes
// them.
func stallClients(addr, key string, convs []string, read bool) (close func()) {
	conns := make([]net.Conn, len(convs))
	var g errgroup.Group
	g.SetLimit(16)
	for i, id := range convs {
		g.Go(func() error {
			c, err := stallOne(addr, key, id)
			if err != nil {
				log.Printf("stalled client %d: %v", i, err)
				return nil
			}
			conns[i] = c
			if read {
				go io.Copy(io.Discard, c)
			}
			return nil
		})
	}
	g.Wait()
	return func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}
}

func stallOne(addr, key, conv string) (net.Conn, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	c.(*net.TCPConn).SetReadBuffer(4096)
	nonce := make([]byte, 16)
	rand.Read(nonce)
	fmt.Fprintf(c, "GET /ws?conversation_id=%s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: %s\r\nX-API-Key: %s\r\n\r\n",
		conv, addr, base64.StdEncoding.EncodeToString(nonce), key)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		c.Close()
		return nil, fmt.Errorf("handshake: %v %v", resp, err)
	}
	msg, _ := json.Marshal(map[string]any{"type": "chat_send", "data": map[string]string{"content": "[stalled] a long answer, please"}})
	frame := []byte{0x81, 0x80 | 126, 0, 0}
	binary.BigEndian.PutUint16(frame[2:], uint16(len(msg)))
	frame = append(frame, 0, 0, 0, 0) // a zero mask: the payload as is
	if _, err := c.Write(append(frame, msg...)); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// storedComplete counts the conversations whose last message is a complete
// answer.
func storedComplete(addr, key string, convs []string) int {
	n := 0
	for _, id := range convs {
		req, _ := http.NewRequest("GET", "http://"+addr+"/api/conversations/"+id, nil)
		req.Header.Set("X-API-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			continue
		}
		var d struct {
			Messages []struct{ Role, Status string }
		}
		json.NewDecoder(io.LimitReader(resp.Body, 1<<30)).Decode(&d)
		resp.Body.Close()
		if m := d.Messages; len(m) > 0 && m[len(m)-1].Role == "assistant" && m[len(m)-1].Status == "complete" {
			n++
		}
	}
	return n
}

// memoryBreakdown reads the server's /metrics and says, in MiB, what its Go
// runtime holds: the heap's objects and its idle spans not yet returned,
// goroutine stacks, and everything it took from the system; the rest of the
// process's RSS is memory the Go runtime does not manage (SQLite's, DuckDB's,
// the C libraries').
func memoryBreakdown(addr, key string, pid int) string {
	anonMiB := serve.MiB(serve.Anonymous(pid))
	req, _ := http.NewRequest("GET", "http://"+addr+"/metrics", nil)
	req.Header.Set("X-API-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "(no /metrics: " + err.Error() + ")"
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	val := map[string]float64{}
	for _, l := range strings.Split(string(b), "\n") {
		if name, v, ok := strings.Cut(l, " "); ok && strings.HasPrefix(name, "go_memstats_") {
			val[name], _ = strconv.ParseFloat(v, 64)
		}
	}
	mib := func(name string) float64 { return val["go_memstats_"+name+"_bytes"] / (1 << 20) }
	return fmt.Sprintf("anonymous %.0f of the RSS; Go: heap in use %.0f, heap idle %.0f (released %.0f), stacks %.0f, from the system %.0f",
		anonMiB, mib("heap_inuse"), mib("heap_idle"), mib("heap_released"), mib("stack_inuse"), mib("sys"))
}
