package main

import (
	"bytes"
	"context"
	"database/sql"
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
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver of database/sql, to read the store

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
// OpenAI's shape, /chat/query, the WebSocket before its upgrade, /healthz), a
// turn gets a chat_error with a reason and a suggested action. Once the
// database is back, the answer the outage cut is stored by its process, as
// the client received it; nothing is left streaming, each turn's usage is
// recorded once, no temporary file is left, and the next turns work, in the
// conversation the outage cut too. Recovery times are logged.
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
	p, key := startFirstProc(t, vars)
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
		if h := request(t, "GET", base+"/healthz", "", "", nil); h.status != 503 || h.header.Get("Retry-After") != "5" {
			t.Errorf("%s: /healthz answered %d, Retry-After %q; want 503, Retry-After 5", phase, h.status, h.header.Get("Retry-After"))
		}
		wantChatError(t, phase+": chat_send on an open WebSocket", turn(open), dbUnavailable)
	}
	up := func(phase string) (back time.Time) {
		t.Helper()
		start := time.Now()
		pg.Restart()
		back = time.Now()
		recovery := pgtest.WaitUntil(t, 30*time.Second, phase+": the API answers again", func() bool {
			return request(t, "GET", base+"/api/conversations", key, "", nil).status == 200
		})
		t.Logf("%s: recovery: PostgreSQL restarted in %s; the API answered 200 %s after it accepted connections",
			phase, back.Sub(start).Round(time.Millisecond), recovery.Round(time.Millisecond))
		return back
	}
	db := storeDB(t, pg.URL)
	pid := p.cmd.Process.Pid

	// 1. The database stops while a turn streams.
	conv := newConversation(t, base, key)
	c := dialWS(t, base, key, conv)
	c.send("chat_send", map[string]string{"content": "slow question"})
	evs := c.until(10*time.Second, "chat_token")
	pg.Stop()
	stopped := time.Now()
	evs = append(evs, c.until(30*time.Second, "chat_complete")...)
	received := tokensText(evs)
	wantChatError(t, "streaming turn when the database stopped", evs, dbUnavailable)
	if ev := evs[len(evs)-1]; !strings.Contains(field(ev, "reason"), "could not be saved") {
		t.Errorf("streaming turn when the database stopped: chat_error %s, want a reason saying the answer could not be saved", ev.Data)
	}
	if received != strings.Join(chunks, "") {
		t.Errorf("streaming turn when the database stopped: the client received %q, want every token", received)
	}
	t.Logf("streaming turn: %d of %d tokens streamed, then chat_error %s after the stop", strings.Count(received, " "), len(chunks), time.Since(stopped).Round(time.Millisecond))
	whileDown("while streaming", c, conv)
	back := up("while streaming")
	// The answer the outage cut is stored by the process that streamed it,
	// as soon as the database is back: interrupted, with the text the client
	// received, and its usage once. Nothing else could store it so: no turn
	// was sent to its conversation since, the sweep of messages left
	// streaming never takes this process's own, and a message interrupted
	// by either would hold only the text flushed before the stop.
	p.waitLog("stored the end of a turn after the store came back", 30*time.Second)
	t.Logf("while streaming: the process stored the answer the outage cut %s after PostgreSQL accepted connections",
		time.Since(back).Round(time.Millisecond))
	cut := storedAnswers(t, db, conv)
	if len(cut) != 1 || cut[0].Status != "interrupted" || cut[0].Content != received || cut[0].ErrorReason == "" {
		t.Errorf("the answer the outage cut, stored: %+v; want it interrupted, with a reason and the %d characters the client received", cut, len(received))
	}
	wantSettled(t, "after the outage while streaming", db, 1)
	wantOnlyOwnTemp(t, "after the outage while streaming", dataDir, pid)
	// Its conversation takes a turn at once (not once a lease lapses), and so
	// does a new one.
	if evs := turn(c); tokensText(evs) != "back again" {
		t.Errorf("a turn in the conversation whose turn the outage cut: %v", evs)
	}
	conv2 := newConversation(t, base, key)
	if evs := turn(dialWS(t, base, key, conv2)); tokensText(evs) != "back again" {
		t.Errorf("a turn in a new conversation once the database is back: %v", evs)
	}
	var statuses []string
	for _, m := range conversationMessages(t, base, key, conv) {
		statuses = append(statuses, m.Role+":"+m.Status)
	}
	if got, want := strings.Join(statuses, " "), "user:complete assistant:interrupted user:complete assistant:complete"; got != want {
		t.Errorf("the conversation whose turn the outage cut: %s, want %s", got, want)
	}
	wantSettled(t, "after the turns that followed the outage while streaming", db, 3)

	// 2. The database stops while nothing runs; a WebSocket stays open.
	idle := dialWS(t, base, key, conv2)
	pg.Stop()
	whileDown("while idle", idle, conv2)
	up("while idle")
	wantSettled(t, "after the outage while idle", db, 3)
	wantOnlyOwnTemp(t, "after the outage while idle", dataDir, pid)
	if evs := turn(idle); tokensText(evs) != "back again" {
		t.Errorf("a turn on the WebSocket kept open through the outage: %v", evs)
	}
	if st, _ := do(t, "POST", base+"/api/conversations/"+conv2+"/sql", key, `{"query":"SELECT 42 AS n"}`); st != 200 {
		t.Errorf("/sql once the database is back: HTTP %d", st)
	}
	wantSettled(t, "after a turn following the outage while idle", db, 4)
	wantOnlyOwnTemp(t, "after the outages", dataDir, pid)
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
// file, no server path; a turn once the store's WAL has no room left, its
// end stored once space is freed if it began), while queries over existing
// datasets go on and
// deletes, which free space, work — two in a row. Nothing temporary is left,
// nothing is left streaming and each turn's usage is recorded once (read in
// the SQLite file), and once space is freed the next upload and turn work.
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
	db := storeDB(t, filepath.Join(dataDir, "datachat.db"))
	conv := newConversation(t, base, key)
	c := dialWS(t, base, key, conv)
	turn := func() []wsEvent {
		t.Helper()
		c.send("chat_send", map[string]string{"content": "hello"})
		return c.until(20*time.Second, "chat_complete")
	}
	if evs := turn(); tokensText(evs) != "fine" {
		t.Fatalf("a turn before the disk is full: %v", evs)
	}
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
	// A turn still fits while the store's WAL, emptied by its checkpoints,
	// has room, and is stored whole; once the WAL must grow, a turn fails,
	// saying why (what it stored is checked below).
	answers, failed := 1, []wsEvent(nil)
	for range 500 {
		evs := turn()
		if len(evs) == 0 || evs[len(evs)-1].Type != "chat_complete" {
			failed = evs
			break
		}
		if tokensText(evs) != "fine" || field(evs[len(evs)-1], "status") != "complete" {
			t.Fatalf("a turn stored on a full disk: %v, want the whole answer", evs)
		}
		answers++
	}
	t.Logf("on a full disk: %d turns stored whole before one failed", answers-1)
	wantChatError(t, "chat turn on a full disk", failed, "The server is out of disk space; nothing new can be stored until space is freed.")
	// The turn that failed stored nothing, or began and could not store its
	// end: the process keeps that end and stores it, interrupted, once there
	// is space again, as after a database outage.
	var cut int
	if err := db.QueryRow(`SELECT count(*) FROM messages WHERE status = 'streaming'`).Scan(&cut); err != nil {
		t.Fatal(err)
	}
	switch cut {
	case 0:
		wantSettled(t, "on a full disk", db, answers)
	case 1:
		t.Logf("on a full disk: the failed turn began, and its end waits for space")
	default:
		t.Errorf("on a full disk: %d answers left streaming, want at most the failed turn's", cut)
	}

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
	if cut == 1 {
		p.waitLog("stored the end of a turn after the store came back", 30*time.Second)
		t.Logf("recovery: the end of the turn the full disk cut stored %s after space was freed", time.Since(freed).Round(time.Millisecond))
		answers++
	}
	if evs := turn(); tokensText(evs) != "fine" {
		t.Errorf("turn once space is freed: %v", evs)
	}
	wantSettled(t, "once space is freed", db, answers+1)
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
// spooling stays; the cut upload left no dataset, nothing is left streaming,
// each turn's usage is recorded once (read in the SQLite file), and the next
// upload and turn work.
func TestServeKilledMidUpload(t *testing.T) {
	if testing.Short() {
		t.Skip("process test skipped in -short mode")
	}
	dataDir := t.TempDir()
	fake := llmtest.NewServer(t, llmtest.OpenAI, llmtest.Script{Default: &llmtest.Turn{Text: []string{"still ", "here"}}})
	vars := map[string]string{
		"DATACHAT_DATA_DIR": dataDir,
		"LLM_PROVIDER":      "openai", "OPENAI_API_KEY": "k", "OPENAI_BASE_URL": fake.URL,
	}
	p := startProc(t, vars)
	key := p.Key
	db := storeDB(t, filepath.Join(dataDir, "datachat.db"))
	conv := newConversation(t, p.URL(), key)
	penguins := testfiles.Penguins(t, t.TempDir())
	turns := 0
	turn := func(what string, p *serveProc) {
		t.Helper()
		c := dialWS(t, p.URL(), key, conv)
		c.send("chat_send", map[string]string{"content": "hello"})
		if evs := c.until(20*time.Second, "chat_complete"); tokensText(evs) != "still here" {
			t.Errorf("%s: a turn: %v", what, evs)
		}
		c.conn.Close(websocket.StatusNormalClosure, "")
		turns++
	}
	turn("before the kills", p)
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
		wantSettled(t, what+": after the restart", db, turns)
		// The upload the kill cut left no dataset; the next upload and
		// turn work.
		st, res := do(t, "GET", p.URL()+"/api/conversations/"+conv+"/datasets", key, "")
		list, ok := res["datasets"].([]any)
		if st != 200 || !ok {
			t.Errorf("%s: datasets after the restart: HTTP %d %v", what, st, res)
		}
		for _, d := range list {
			if name, _ := d.(map[string]any)["name"].(string); !strings.HasPrefix(name, "penguins") {
				t.Errorf("%s: dataset %q listed after the restart, want only the uploads that succeeded", what, name)
			}
		}
		if st, res := upload(t, p.URL(), key, conv, penguins); st != 201 {
			t.Errorf("%s: upload after the restart: HTTP %d %v", what, st, res)
		}
		turn(what+": after the restart", p)
		wantSettled(t, what+": after a turn following the restart", db, turns)
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

// storeDB opens, for the test to read directly, the store of the serve
// processes under test: a PostgreSQL database (a postgres:// URL) or an
// SQLite file (read-only).
func storeDB(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	driver := "sqlite"
	if strings.HasPrefix(dsn, "postgres://") {
		driver = "pgx"
	} else {
		dsn = "file:" + dsn + "?mode=ro"
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	// No connection kept between checks: the tests restart the database
	// under it, and a kept connection would be one the restart ended.
	db.SetMaxIdleConns(0)
	t.Cleanup(func() { db.Close() })
	return db
}

// sqlString quotes s as an SQL string literal (the two stores bind
// parameters differently).
func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// storedAnswer is an assistant message as the store holds it.
type storedAnswer struct {
	ID, Status, Content, ErrorReason string
}

// storedAnswers reads a conversation's answers from the store, oldest first.
func storedAnswers(t *testing.T, db *sql.DB, conv string) []storedAnswer {
	t.Helper()
	rows, err := db.Query(`SELECT id, status, content, error_reason FROM messages
		WHERE role = 'assistant' AND conversation_id = ` + sqlString(conv) + ` ORDER BY created_at, id`)
	if err != nil {
		t.Fatalf("read the answers of %s: %v", conv, err)
	}
	defer rows.Close()
	var out []storedAnswer
	for rows.Next() {
		var a storedAnswer
		if err := rows.Scan(&a.ID, &a.Status, &a.Content, &a.ErrorReason); err != nil {
			t.Fatal(err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// wantSettled checks, in the store itself, what no fault may leave behind: a
// message still streaming, in any conversation, or a turn whose usage is not
// recorded exactly once — each answer has one token_usage row, holding the
// answer's tokens, and no row belongs to anything else. The store holds
// answers answers.
func wantSettled(t *testing.T, what string, db *sql.DB, answers int) {
	t.Helper()
	rows, err := db.Query(`SELECT conversation_id, role FROM messages WHERE status = 'streaming'`)
	if err != nil {
		t.Fatalf("%s: read the messages left streaming: %v", what, err)
	}
	for rows.Next() {
		var conv, role string
		rows.Scan(&conv, &role)
		t.Errorf("%s: a %s message of conversation %s is still streaming", what, role, conv)
	}
	rows.Close()

	rows, err = db.Query(`
		SELECT m.id, m.status, m.input_tokens, m.output_tokens, COUNT(u.id),
			CAST(COALESCE(SUM(u.input_tokens), 0) AS BIGINT), CAST(COALESCE(SUM(u.output_tokens), 0) AS BIGINT)
		FROM messages m LEFT JOIN token_usage u ON u.message_id = m.id
		WHERE m.role = 'assistant'
		GROUP BY m.id, m.status, m.input_tokens, m.output_tokens`)
	if err != nil {
		t.Fatalf("%s: read the answers' usage: %v", what, err)
	}
	n := 0
	for rows.Next() {
		var id, status string
		var in, out, usageRows, usageIn, usageOut int64
		if err := rows.Scan(&id, &status, &in, &out, &usageRows, &usageIn, &usageOut); err != nil {
			t.Fatal(err)
		}
		n++
		if usageRows != 1 || usageIn != in || usageOut != out || in+out == 0 {
			t.Errorf("%s: answer %s (%s, %d+%d tokens) has %d token_usage rows, for %d+%d tokens; want one, with its tokens",
				what, id, status, in, out, usageRows, usageIn, usageOut)
		}
	}
	rows.Close()
	var usage int
	if err := db.QueryRow(`SELECT COUNT(*) FROM token_usage`).Scan(&usage); err != nil {
		t.Fatal(err)
	}
	if n != answers || usage != answers {
		t.Errorf("%s: %d answers and %d token_usage rows stored, want %d of each (one per turn)", what, n, usage, answers)
	}
}

// TestServeUnansweredPings: a WebSocket client of a real `datachat serve`
// that stops answering pings in the middle of an answer (it reads nothing
// more, as a client that vanished while its answer still fits in the
// kernel's buffers) is closed by the server once a ping goes unanswered
// (DATACHAT_WS_PING_INTERVAL and DATACHAT_WS_PING_TIMEOUT made short), and
// its turn goes on without it: stored complete with the whole answer, its
// usage recorded once; nothing is left streaming or temporary, and the
// conversation's next turn works.
func TestServeUnansweredPings(t *testing.T) {
	if testing.Short() {
		t.Skip("process test skipped in -short mode")
	}
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	defer free()
	fake := llmtest.NewServer(t, llmtest.OpenAI, llmtest.Script{
		// Two tokens, then nothing until the client is gone, then the rest.
		Turns:   []llmtest.Turn{{Match: &llmtest.Match{Contains: "stall"}, Text: []string{"hello ", "there ", "again"}, Fault: &llmtest.Fault{Kind: llmtest.FaultStall, After: 3, Release: release}}},
		Default: &llmtest.Turn{Text: []string{"fine"}},
	})
	dataDir := t.TempDir()
	vars := map[string]string{
		"DATACHAT_DATA_DIR": dataDir,
		"LLM_PROVIDER":      "openai", "OPENAI_API_KEY": "k", "OPENAI_BASE_URL": fake.URL,
		"DATACHAT_WS_PING_INTERVAL": "100ms",
		"DATACHAT_WS_PING_TIMEOUT":  "500ms",
	}
	p := startProc(t, vars)
	key, base := p.Key, p.URL()
	db := storeDB(t, filepath.Join(dataDir, "datachat.db"))
	conv := newConversation(t, base, key)

	// A client of its own: it answers pings only while it reads (as every
	// coder/websocket client does), and it stops reading after the tokens.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, strings.Replace(base, "http://", "ws://", 1)+"/ws?conversation_id="+conv+"&api_key="+key, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	if err := conn.Write(ctx, websocket.MessageText, []byte(`{"type":"chat_send","data":{"content":"stall, please"}}`)); err != nil {
		t.Fatal(err)
	}
	var received []wsEvent
	for tokensText(received) != "hello there " {
		_, b, err := conn.Read(ctx)
		if err != nil {
			t.Fatalf("before the tokens: %v (events %v)", err, received)
		}
		var ev wsEvent
		json.Unmarshal(b, &ev)
		if ev.Type != "chat_token" {
			t.Fatalf("unexpected event %s", b)
		}
		received = append(received, ev)
	}

	// From here on the client reads nothing and answers nothing.
	p.waitLog("websocket client gone: closing", 30*time.Second)
	if _, b, err := conn.Read(ctx); err == nil || ctx.Err() != nil {
		t.Errorf("the connection after the unanswered ping: read %s, %v; want it closed by the server", b, err)
	}
	free()
	var stored []storedAnswer
	pgtest.WaitUntil(t, 30*time.Second, "the turn to end", func() bool {
		stored = storedAnswers(t, db, conv)
		return len(stored) == 1 && stored[0].Status != "streaming"
	})
	if a := stored[0]; a.Status != "complete" || a.Content != "hello there again" {
		t.Errorf("the turn of the client that stopped answering: stored %s %q, want the whole answer complete", a.Status, a.Content)
	}
	wantSettled(t, "after the client was dropped", db, 1)
	wantOnlyOwnTemp(t, "after the client was dropped", dataDir, p.cmd.Process.Pid)

	c := dialWS(t, base, key, conv)
	c.send("chat_send", map[string]string{"content": "hello"})
	if evs := c.until(20*time.Second, "chat_complete"); tokensText(evs) != "fine" {
		t.Errorf("the next turn, on a new WebSocket: %v", evs)
	}
	wantSettled(t, "after the next turn", db, 2)
}
