package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"datachat/internal/disktest"
	"datachat/internal/llmtest"
	"datachat/internal/postgres/pgtest"
	"datachat/internal/testfiles"
)

// The faults of issue 15, run for real against `datachat serve` processes:
// the database stopped and started again, the data directory's disk full,
// the process killed in the middle of an upload and of a conversion.

// answer is an HTTP answer: status, headers, the decoded JSON body, the raw
// body.
type answer struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func request(t *testing.T, method, url, key, contentType string, body []byte) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, header: resp.Header, raw: string(b)}
	json.Unmarshal(b, &a.body)
	return a
}

// multipartFile is a multipart body with data as the field "file".
func multipartFile(name string, data []byte) (contentType string, body []byte) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	fw, _ := mw.CreateFormFile("file", name)
	fw.Write(data)
	mw.Close()
	return mw.FormDataContentType(), b.Bytes()
}

// errorMessage is the message of an error answer, in datachat's shape or
// OpenAI's.
func (a answer) errorMessage() string {
	e, _ := a.body["error"].(map[string]any)
	s, _ := e["message"].(string)
	return s
}

// wantBusy checks an answer is 503 with Retry-After retryAfter and a message
// starting with msg that shows no server path.
func wantBusy(t *testing.T, what string, a answer, msg, retryAfter string, paths ...string) {
	t.Helper()
	if a.status != http.StatusServiceUnavailable || a.header.Get("Retry-After") != retryAfter {
		t.Errorf("%s: got HTTP %d, Retry-After %q; want 503, Retry-After %s: %s", what, a.status, a.header.Get("Retry-After"), retryAfter, a.raw)
		return
	}
	m := a.errorMessage()
	if !strings.HasPrefix(m, msg) {
		t.Errorf("%s: message %q, want %q", what, m, msg)
	}
	for _, p := range paths {
		if strings.Contains(a.raw, p) {
			t.Errorf("%s: the answer shows the server path %s: %s", what, p, a.raw)
		}
	}
	if strings.Contains(a.raw, "Internal error") {
		t.Errorf("%s: %s", what, a.raw)
	}
}

// dialWSAnswer dials the chat WebSocket expecting a refusal, and returns the
// HTTP answer.
func dialWSAnswer(t *testing.T, base, key, conv string) answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	url := strings.Replace(base, "http://", "ws://", 1) + "/ws?conversation_id=" + conv + "&api_key=" + key
	c, resp, err := websocket.Dial(ctx, url, nil)
	if err == nil {
		c.CloseNow()
		t.Fatalf("WebSocket %s: upgraded, want a refusal", url)
	}
	if resp == nil {
		t.Fatalf("WebSocket %s: %v, want an HTTP refusal", url, err)
	}
	a := answer{status: resp.StatusCode, header: resp.Header}
	if resp.Body != nil {
		b, _ := io.ReadAll(resp.Body)
		a.raw = string(b)
		json.Unmarshal(b, &a.body)
	}
	return a
}

// wantChatError checks the last event is a chat_error with message msg, a
// reason and a suggested action.
func wantChatError(t *testing.T, what string, evs []wsEvent, msg string) {
	t.Helper()
	if len(evs) == 0 || evs[len(evs)-1].Type != "chat_error" {
		t.Errorf("%s: events %v, want a chat_error", what, evs)
		return
	}
	ev := evs[len(evs)-1]
	if field(ev, "message") != msg || field(ev, "reason") == "" || field(ev, "suggested_action") == "" {
		t.Errorf("%s: chat_error %s, want %q with a reason and a suggested action", what, ev.Data, msg)
	}
}

const (
	dbUnavailable = "The database is unavailable; try again in a few seconds."
	diskFull      = "The server is out of disk space"
)

// TestServeDatabaseOutage stops a real PostgreSQL under `datachat serve`, in
// the middle of a streamed answer and again while idle, and starts it again:
// in between every route answers 503 busy with Retry-After (REST, /v1 in
// OpenAI's shape, /chat/query, the WebSocket before its upgrade), a turn gets
// a chat_error with a reason and a suggested action, and once the database is
// back the next request works. Recovery times are logged.
func TestServeDatabaseOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("process test skipped in -short mode")
	}
	pg := pgtest.Start(t)
	chunks := make([]string, 100)
	for i := range chunks {
		chunks[i] = fmt.Sprintf("w%02d ", i)
	}
	fake := llmtest.NewServer(t, llmtest.OpenAI, llmtest.Script{
		Turns:   []llmtest.Turn{{Match: &llmtest.Match{Contains: "slow question"}, Text: chunks, Delay: llmtest.Duration(50 * time.Millisecond)}},
		Default: &llmtest.Turn{Text: []string{"back ", "again"}},
	})
	dataDir := t.TempDir()
	vars := map[string]string{
		"DATACHAT_DATABASE_URL": pg.URL,
		"DATACHAT_DATA_DIR":     dataDir,
		"LLM_PROVIDER":          "openai", "OPENAI_API_KEY": "k", "OPENAI_BASE_URL": fake.URL,
	}
	p := startProc(t, vars)
	key := p.Key
	if key == "" {
		t.Fatal("no login URL on the first start")
	}
	base := p.URL()
	turn := func(c *wsClient) []wsEvent {
		t.Helper()
		c.send("chat_send", map[string]string{"content": "hello"})
		return c.until(20*time.Second, "chat_complete")
	}
	whileDown := func(phase string, open *wsClient, conv string) {
		t.Helper()
		wantBusy(t, phase+": GET /api/conversations", request(t, "GET", base+"/api/conversations", key, "", nil), dbUnavailable, "5")
		wantBusy(t, phase+": POST /api/conversations", request(t, "POST", base+"/api/conversations", key, "application/json", []byte(`{"title":"x"}`)), dbUnavailable, "5")
		wantBusy(t, phase+": POST /sql", request(t, "POST", base+"/api/conversations/"+conv+"/sql", key, "application/json", []byte(`{"query":"SELECT 1"}`)), dbUnavailable, "5")
		wantBusy(t, phase+": POST /chat/query", request(t, "POST", base+"/chat/query", key, "application/json", []byte(`{"query":"hello"}`)), dbUnavailable, "5")
		v1 := request(t, "POST", base+"/v1/chat/completions", key, "application/json", []byte(`{"model":"datachat","messages":[{"role":"user","content":"hi"}]}`))
		wantBusy(t, phase+": POST /v1/chat/completions", v1, dbUnavailable, "5")
		if e, _ := v1.body["error"].(map[string]any); e["type"] != "server_error" || e["code"] != "server_busy" {
			t.Errorf("%s: /v1 error %v, want OpenAI's shape with type server_error, code server_busy", phase, v1.body)
		}
		wantBusy(t, phase+": GET /ws", dialWSAnswer(t, base, key, conv), dbUnavailable, "5")
		if h := request(t, "GET", base+"/healthz", "", "", nil); h.status != 503 {
			t.Errorf("%s: /healthz answered %d, want 503", phase, h.status)
		}
		wantChatError(t, phase+": chat_send on an open WebSocket", turn(open), dbUnavailable)
	}
	up := func(phase string) {
		t.Helper()
		start := time.Now()
		pg.Restart()
		restarted := time.Since(start)
		recovery := pgtest.WaitUntil(t, 30*time.Second, phase+": the API answers again", func() bool {
			return request(t, "GET", base+"/api/conversations", key, "", nil).status == 200
		})
		t.Logf("%s: recovery: PostgreSQL restarted in %s; the API answered 200 %s after it accepted connections",
			phase, restarted.Round(time.Millisecond), recovery.Round(time.Millisecond))
	}

	// 1. The database stops while a turn streams.
	conv := newConversation(t, base, key)
	c := dialWS(t, base, key, conv)
	c.send("chat_send", map[string]string{"content": "slow question"})
	evs := c.until(10*time.Second, "chat_token")
	pg.Stop()
	stopped := time.Now()
	evs = append(evs, c.until(30*time.Second, "chat_complete")...)
	wantChatError(t, "streaming turn when the database stopped", evs, dbUnavailable)
	t.Logf("streaming turn: %d of %d tokens streamed, then chat_error %s after the stop", strings.Count(tokensText(evs), " "), len(chunks), time.Since(stopped).Round(time.Millisecond))
	whileDown("while streaming", c, conv)
	up("while streaming")
	conv2 := newConversation(t, base, key)
	if evs := turn(dialWS(t, base, key, conv2)); tokensText(evs) != "back again" {
		t.Errorf("a turn once the database is back: %v", evs)
	}
	// The conversation whose turn the outage cut: its answer could not be
	// stored as it ended, and stays streaming, its lease unrenewed, until the
	// lease lapses; then the next turn marks it interrupted and goes on.
	var statuses []string
	for _, m := range conversationMessages(t, base, key, conv) {
		statuses = append(statuses, m.Role+":"+m.Status)
	}
	var last []wsEvent
	wait := pgtest.WaitUntil(t, 60*time.Second, "a turn in the conversation whose turn the outage cut", func() bool {
		last = turn(c)
		return tokensText(last) == "back again"
	})
	t.Logf("the conversation whose turn the outage cut was %v after the recovery; it took a turn again %s later (its lease lapsed)",
		statuses, wait.Round(time.Millisecond))
	statuses = statuses[:0]
	for _, m := range conversationMessages(t, base, key, conv) {
		statuses = append(statuses, m.Role+":"+m.Status)
	}
	if want := "user:complete assistant:interrupted user:complete assistant:complete"; !strings.HasSuffix(strings.Join(statuses, " "), want) {
		t.Errorf("the conversation whose turn the outage cut: %v, want it to end with %s", statuses, want)
	}

	// 2. The database stops while nothing runs; a WebSocket stays open.
	idle := dialWS(t, base, key, conv2)
	pg.Stop()
	whileDown("while idle", idle, conv2)
	up("while idle")
	if evs := turn(idle); tokensText(evs) != "back again" {
		t.Errorf("a turn on the WebSocket kept open through the outage: %v", evs)
	}
	if st, _ := do(t, "POST", base+"/api/conversations/"+conv2+"/sql", key, `{"query":"SELECT 42 AS n"}`); st != 200 {
		t.Errorf("/sql once the database is back: HTTP %d", st)
	}
	wantOnlyOwnTemp(t, "after the outages", dataDir, p.cmd.Process.Pid)
}

// tempEntries lists what is under the data directory's temporary
// directories, relative to it.
func tempEntries(t *testing.T, dataDir string) []string {
	t.Helper()
	var out []string
	for _, d := range []string{"tmp", filepath.Join("datasets", ".tmp")} {
		filepath.WalkDir(filepath.Join(dataDir, d), func(p string, e fs.DirEntry, err error) error {
			if err == nil && p != filepath.Join(dataDir, d) {
				rel, _ := filepath.Rel(dataDir, p)
				out = append(out, rel)
			}
			return nil
		})
	}
	return out
}

// wantOnlyOwnTemp checks that the temporary directories hold nothing but the
// directories of the process with pid, and in them only their lock, the
// space reserved for deletes and its live SQL workers' directories; and
// whatever is in the directories of the other live processes.
func wantOnlyOwnTemp(t *testing.T, what, dataDir string, pid int, others ...int) {
	t.Helper()
	own := fmt.Sprintf("proc-%d-", pid)
	for _, e := range tempEntries(t, dataDir) {
		parts := strings.Split(e, string(filepath.Separator))
		i := 1
		if parts[0] == "datasets" {
			i = 2
		}
		other := false
		for _, o := range others {
			other = other || len(parts) > i && strings.HasPrefix(parts[i], fmt.Sprintf("proc-%d-", o))
		}
		switch {
		case len(parts) <= i || other:
		case !strings.HasPrefix(parts[i], own):
			t.Errorf("%s: %s left (not the running process's)", what, e)
		case len(parts) == i+2 && (parts[i+1] == ".lock" || parts[i+1] == "reserve"):
		case len(parts) > i+1 && strings.HasPrefix(parts[i+1], "sql-"): // a live SQL worker's
		case len(parts) > i+1:
			t.Errorf("%s: %s left in the running process's directory", what, e)
		}
	}
}

// TestServeFullDisk fills the disk of the data directory (a 64 MiB tmpfs)
// under `datachat serve`: uploads of datasets and documents and chat turns
// answer that the server is out of disk space (503, never a 400 against the
// file, no server path), while queries over existing datasets go on and
// deletes, which free space, work — two in a row. Nothing temporary is left,
// and once space is freed the next upload and turn work.
func TestServeFullDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("process test skipped in -short mode")
	}
	disk := disktest.Small(t, 64<<20)
	dataDir := filepath.Join(disk, "data")
	fake := llmtest.NewServer(t, llmtest.OpenAI, llmtest.Script{Default: &llmtest.Turn{Text: []string{"fine"}}})
	vars := map[string]string{
		"DATACHAT_DATA_DIR": dataDir,
		"LLM_PROVIDER":      "openai", "OPENAI_API_KEY": "k", "OPENAI_BASE_URL": fake.URL,
	}
	p := startProc(t, vars)
	key, base := p.Key, p.URL()
	conv := newConversation(t, base, key)
	st, ds := upload(t, base, key, conv, testfiles.Penguins(t, t.TempDir()))
	if st != 201 {
		t.Fatalf("upload: HTTP %d %v", st, ds)
	}
	doc := filepath.Join(t.TempDir(), "notes.md")
	os.WriteFile(doc, []byte("# Notes\n\nPenguins live in the south.\n"), 0o600)
	st, dd := uploadDocument(t, base, key, conv, doc)
	if st != 201 {
		t.Fatalf("document upload: HTTP %d %v", st, dd)
	}

	filler := disktest.Fill(t, disk, 0)
	t.Logf("disk filled: %d bytes free", disktest.Free(t, disk))
	csv := randomCSV(20000)
	ct, body := multipartFile("fill21.csv", csv)
	wantBusy(t, "dataset upload on a full disk", request(t, "POST", base+"/api/conversations/"+conv+"/datasets", key, ct, body), diskFull, "60", disk)
	ct, body = multipartFile("more.md", bytes.Repeat([]byte("More about penguins. "), 20000))
	wantBusy(t, "document upload on a full disk", request(t, "POST", base+"/api/conversations/"+conv+"/documents", key, ct, body), diskFull, "60", disk)
	c := dialWS(t, base, key, conv)
	c.send("chat_send", map[string]string{"content": "hello"})
	evs := c.until(20*time.Second, "chat_complete")
	wantChatError(t, "chat turn on a full disk", evs, "The server is out of disk space; nothing new can be stored until space is freed.")

	// Queries over existing datasets go on, in a worker started now.
	q := request(t, "POST", base+"/api/conversations/"+conv+"/sql", key, "application/json", []byte(`{"query":"SELECT count(*) AS n FROM penguins"}`))
	if rows, _ := q.body["rows"].([]any); q.status != 200 || len(rows) != 1 || rows[0].([]any)[0] != float64(testfiles.PenguinsRows) {
		t.Errorf("/sql on a full disk: HTTP %d %s", q.status, q.raw)
	}
	// Deleting frees space, and works on a full disk: twice in a row.
	if a := request(t, "DELETE", base+"/api/conversations/"+conv+"/datasets/"+ds["id"].(string), key, "", nil); a.status != 204 {
		t.Errorf("delete a dataset on a full disk: HTTP %d %s", a.status, a.raw)
	}
	if a := request(t, "DELETE", base+"/api/conversations/"+conv+"/documents/"+dd["id"].(string), key, "", nil); a.status != 204 {
		t.Errorf("delete a document on a full disk, right after: HTTP %d %s", a.status, a.raw)
	}
	wantOnlyOwnTemp(t, "on a full disk", dataDir, p.cmd.Process.Pid)

	os.Remove(filler)
	freed := time.Now()
	ct, body = multipartFile("fill21.csv", csv)
	if a := request(t, "POST", base+"/api/conversations/"+conv+"/datasets", key, ct, body); a.status != 201 {
		t.Errorf("upload once space is freed: HTTP %d %s", a.status, a.raw)
	}
	t.Logf("recovery: the first upload after space was freed succeeded in %s", time.Since(freed).Round(time.Millisecond))
	c.send("chat_send", map[string]string{"content": "hello"})
	if evs := c.until(20*time.Second, "chat_complete"); tokensText(evs) != "fine" {
		t.Errorf("turn once space is freed: %v", evs)
	}
	wantOnlyOwnTemp(t, "after", dataDir, p.cmd.Process.Pid)
}

// randomCSV is a CSV of n rows that compresses badly.
func randomCSV(n int) []byte {
	var b bytes.Buffer
	b.WriteString("id,x,label\n")
	r := rand.New(rand.NewPCG(uint64(n), 7))
	for i := range n {
		fmt.Fprintf(&b, "%d,%d,%x\n", i, r.Int64(), r.Uint64())
	}
	return b.Bytes()
}

// postInBackground posts an upload whose body comes from r, ignoring the
// answer: the server is killed under it.
func postInBackground(url, key, contentType string, r io.Reader) {
	go func() {
		req, _ := http.NewRequest("POST", url, r)
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("X-API-Key", key)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
}

// globOne returns the first path matching pattern, or "".
func globOne(pattern string) string {
	m, _ := filepath.Glob(pattern)
	if len(m) == 0 {
		return ""
	}
	return m[0]
}

// endlessUpload posts to url a CSV upload whose body sends 8 MiB and then
// nothing more (within the 30 s the server waits for more) until stop is
// called.
func endlessUpload(url, key string) (stop func()) {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		fw, err := mw.CreateFormFile("file", "endless.csv")
		if err != nil {
			return
		}
		fw.Write([]byte("id,x\n"))
		row := bytes.Repeat([]byte("1,2\n"), 16<<10)
		for range 128 {
			if _, err := fw.Write(row); err != nil {
				return
			}
		}
	}()
	postInBackground(url, key, mw.FormDataContentType(), pr)
	var once sync.Once
	return func() { once.Do(func() { pw.CloseWithError(io.ErrClosedPipe) }) }
}

// spooled waits until a process (pid) spools an upload of more than 4 MiB in
// dataDir, and returns its file.
func spooled(t *testing.T, dataDir string, pid int) string {
	t.Helper()
	var f string
	pgtest.WaitUntil(t, 30*time.Second, "the upload to be spooled", func() bool {
		f = globOne(filepath.Join(dataDir, "datasets", ".tmp", fmt.Sprintf("proc-%d-*", pid), "upload-*"))
		fi, err := os.Stat(f)
		return f != "" && err == nil && fi.Size() > 4<<20
	})
	return f
}

// TestServeKilledMidUpload kills `datachat serve` with SIGKILL in the middle
// of an upload and in the middle of a conversion (with a SQL worker up), and
// starts it again: what the killed process left in the data directory's
// temporary directories is gone once the new one serves (it sweeps at start),
// while the upload another live process on the same data directory is
// spooling stays; and uploads work.
func TestServeKilledMidUpload(t *testing.T) {
	if testing.Short() {
		t.Skip("process test skipped in -short mode")
	}
	dataDir := t.TempDir()
	vars := map[string]string{"DATACHAT_DATA_DIR": dataDir}
	p := startProc(t, vars)
	key := p.Key
	conv := newConversation(t, p.URL(), key)
	penguins := testfiles.Penguins(t, t.TempDir())
	var others []int // live processes on the same data directory
	restart := func(what string) *serveProc {
		t.Helper()
		left := tempEntries(t, dataDir)
		if len(left) == 0 {
			t.Fatalf("%s: the killed process left nothing: the fault did not happen", what)
		}
		start := time.Now()
		p := startProc(t, vars)
		t.Logf("%s: restart served in %s; the killed process had left %d entries: %v",
			what, time.Since(start).Round(time.Millisecond), len(left), left)
		if line := grepLog(p.Log(), "temporary files left by processes that are gone removed"); line != "" {
			t.Logf("%s: %s", what, line)
		}
		wantOnlyOwnTemp(t, what+": after the restart", dataDir, p.cmd.Process.Pid, others...)
		if st, res := upload(t, p.URL(), key, conv, penguins); st != 201 {
			t.Errorf("%s: upload after the restart: HTTP %d %v", what, st, res)
		}
		return p
	}

	// 1. Killed while an upload is spooled (its body never ends), while
	// another process on the same data directory spools one too.
	b := startProc(t, vars)
	others = append(others, b.cmd.Process.Pid)
	stopB := endlessUpload(b.URL()+"/api/conversations/"+conv+"/datasets", key)
	defer stopB()
	live := spooled(t, dataDir, b.cmd.Process.Pid)
	stopA := endlessUpload(p.URL()+"/api/conversations/"+conv+"/datasets", key)
	spooled(t, dataDir, p.cmd.Process.Pid)
	p.Kill()
	stopA()
	// Leftovers of an earlier release's layout, an hour old, go too.
	legacy := filepath.Join(dataDir, "datasets", ".tmp", "upload-123456")
	os.WriteFile(legacy, []byte("x"), 0o600)
	os.Chtimes(legacy, time.Now().Add(-2*time.Hour), time.Now().Add(-2*time.Hour))
	before, _ := os.Stat(live)
	p = restart("killed mid-upload")
	if after, err := os.Stat(live); err != nil || after.Size() < before.Size() {
		t.Errorf("the live process's upload was removed by the restart's sweep: %v", err)
	}
	stopB()
	b.Kill()
	others = nil

	// 2. Killed while a large CSV is converted, with a SQL worker up.
	if st, res := do(t, "POST", p.URL()+"/api/conversations/"+conv+"/sql", key, `{"query":"SELECT count(*) FROM penguins"}`); st != 200 {
		t.Fatalf("query: HTTP %d %v", st, res)
	}
	ct, body := multipartFile("large.csv", randomCSV(600000)) // about 25 MiB
	postInBackground(p.URL()+"/api/conversations/"+conv+"/datasets", key, ct, bytes.NewReader(body))
	var work, output string
	pgtest.WaitUntil(t, 60*time.Second, "DuckDB to write the Parquet file", func() bool {
		if work == "" {
			work = globOne(filepath.Join(dataDir, "datasets", ".tmp", "proc-*", "*", "dc-input"))
			return false
		}
		output = globOne(filepath.Join(filepath.Dir(work), "dc-output*"))
		_, err := os.Stat(work)
		return output != "" || err != nil // writing, or already done
	})
	p.Kill()
	if _, err := os.Stat(output); output == "" || err != nil {
		t.Fatalf("the conversion ended before the kill (%v): make the file larger", err)
	}
	if globOne(filepath.Join(dataDir, "tmp", "proc-*", "sql-*")) == "" {
		t.Error("no SQL worker directory was left by the killed process")
	}
	restart("killed mid-conversion")
}

// grepLog returns the first line of log containing s.
func grepLog(log, s string) string {
	for line := range strings.Lines(log) {
		if strings.Contains(line, s) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}
