package duckdb

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"datachat"
	"datachat/internal/duckdb/wire"
)

// proc is one worker process, seen from the server: the same binary started
// again with wire.WorkerEnv set (see package worker), talking frames over two pipes.
// One request is in flight at a time.
type proc struct {
	cmd     *exec.Cmd
	toW     *os.File      // the pipe the worker reads (its fd 3)
	w       *bufio.Writer // over toW
	replies chan []byte   // frames from the worker; closed when reading stops
	ready   chan struct{} // closed when the worker has readied DuckDB (an empty frame)
	exited  chan struct{} // closed once the process has been waited for
	stopped chan struct{} // closed when the server gives the process up
	stderr  *tailWriter
	stop    sync.Once

	mu     sync.Mutex
	killed error  // why the server killed it, if it did
	seq    uint64 // numbers the requests, so a cancel names the one it means
}

// errWorkerGone is what a call on a worker that has ended returns when the
// server ended it on purpose (closing, or replacing it).
var errWorkerGone = errors.New("sql worker stopped")

// startProc starts a worker process. It does nothing until it reads its
// first frame, which says what it is for.
func startProc(o *Options) (*proc, error) {
	workerIn, toW, err := pipePair() // the worker reads what we write
	if err != nil {
		return nil, err
	}
	fromW, workerOut, err := pipePair() // we read what the worker writes
	if err != nil {
		toW.Close()
		workerIn.Close()
		return nil, err
	}
	cmd := exec.Command(o.Command[0], o.Command[1:]...)
	cmd.Env = workerEnviron(o)
	cmd.Dir = o.TempDir
	cmd.ExtraFiles = []*os.File{workerIn, workerOut} // fds 3 and 4
	p := &proc{
		cmd:     cmd,
		toW:     toW,
		w:       bufio.NewWriterSize(toW, 64<<10),
		replies: make(chan []byte),
		ready:   make(chan struct{}),
		exited:  make(chan struct{}),
		stopped: make(chan struct{}),
		stderr:  &tailWriter{max: 16 << 10},
	}
	cmd.Stdout = p.stderr // DuckDB writes nothing there; if it did, it must not mix with the frames
	cmd.Stderr = p.stderr
	cmd.SysProcAttr = workerSysProcAttr()
	err = cmd.Start()
	workerIn.Close()
	workerOut.Close()
	if err != nil {
		toW.Close()
		fromW.Close()
		return nil, fmt.Errorf("start sql worker: %w", err)
	}
	go p.read(fromW)
	go func() {
		cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

func pipePair() (r, w *os.File, err error) {
	r, w, err = os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("sql worker pipe: %w", err)
	}
	return r, w, nil
}

// workerEnviron is a worker's whole environment: nothing of the server's
// (API keys, database URLs) reaches it.
func workerEnviron(o *Options) []string {
	return []string{
		wire.WorkerEnv + "=1",
		"HOME=" + o.TempDir,
		"TMPDIR=" + o.TempDir,
		"LANG=C.UTF-8",
	}
}

func (p *proc) read(r *os.File) {
	defer r.Close()
	defer close(p.replies)
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		b, err := wire.ReadFrame(br)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
				p.kill(fmt.Errorf("sql worker sent a bad frame: %w", err))
			}
			return
		}
		if len(b) == 0 {
			// The worker is ready (an empty frame); no reply is empty.
			select {
			case <-p.ready:
			default:
				close(p.ready)
			}
			continue
		}
		select {
		case p.replies <- b:
		case <-p.stopped:
			return
		}
	}
}

// isReady reports whether the worker has said it readied DuckDB.
func (p *proc) isReady() bool {
	select {
	case <-p.ready:
		return true
	default:
		return false
	}
}

// send writes one frame to the worker.
func (p *proc) send(b []byte) error {
	if err := wire.WriteFrame(p.w, b); err != nil {
		return p.deathOr(fmt.Errorf("write to sql worker: %w", err))
	}
	return nil
}

// call sends a request (op and its body) and waits for its reply. When ctx ends first, the
// worker is asked to cancel and given grace to answer, then killed; when hard
// passes first (0: never), it is killed and the call fails with onHard.
func (p *proc) call(ctx context.Context, op byte, body []byte, hard, grace time.Duration, onHard error) ([]byte, error) {
	return p.callWith(ctx, op, body, hard, grace, onHard, nil)
}

// callWith is call, handing each progress frame that comes before the reply
// (its content after the status byte) to progress. With a nil progress a
// progress frame is the reply, which then does not decode: only ingest
// workers send them.
func (p *proc) callWith(ctx context.Context, op byte, body []byte, hard, grace time.Duration, onHard error, progress func([]byte)) ([]byte, error) {
	p.mu.Lock()
	p.seq++
	seq := p.seq
	p.mu.Unlock()
	if err := p.send(wire.Request(op, seq, body)); err != nil {
		return nil, err
	}
	var hardC <-chan time.Time
	if hard > 0 {
		t := time.NewTimer(hard)
		defer t.Stop()
		hardC = t.C
	}
	isProgress := func(b []byte) bool {
		if progress == nil || len(b) == 0 || b[0] != wire.ReplyProgress {
			return false
		}
		progress(b[1:])
		return true
	}
wait:
	for {
		select {
		case b, ok := <-p.replies:
			if !ok {
				return nil, p.death()
			}
			if isProgress(b) {
				continue
			}
			return b, nil
		case <-hardC:
			p.kill(onHard)
			return nil, onHard
		case <-ctx.Done():
			break wait
		}
	}
	// The caller gave up: stop the query, keep the worker if it answers.
	if err := p.send(wire.Cancel(seq)); err != nil {
		return nil, ctx.Err()
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	for {
		select {
		case b, ok := <-p.replies:
			if !ok {
				p.death()
			} else if isProgress(b) {
				continue
			}
		case <-t.C:
			p.kill(context.Cause(ctx))
		case <-hardC:
			p.kill(onHard)
		}
		return nil, ctx.Err()
	}
}

// kill ends the process at once (SIGKILL), recording why.
func (p *proc) kill(why error) {
	p.mu.Lock()
	if p.killed == nil {
		p.killed = why
	}
	p.mu.Unlock()
	p.cmd.Process.Kill()
	p.close()
}

// close stops talking to the worker: it reads EOF and exits by itself.
func (p *proc) close() {
	p.stop.Do(func() {
		close(p.stopped)
		p.toW.Close()
	})
}

// shutdown closes the worker and waits for it to exit, killing it after
// grace.
func (p *proc) shutdown(grace time.Duration) {
	p.close()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.exited:
	case <-t.C:
		p.kill(errWorkerGone)
		<-p.exited
	}
}

// alive reports whether the process has not exited and was not given up.
func (p *proc) alive() bool {
	select {
	case <-p.exited:
		return false
	case <-p.stopped:
		return false
	default:
		return true
	}
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// deathOr returns why the worker died if it has, else err.
func (p *proc) deathOr(err error) error {
	select {
	case <-p.exited:
		return p.death()
	case <-time.After(time.Second):
		return err
	}
}

// death waits for the process to exit and says why it ended, in words the
// model can act on: a *datachat.QueryError for what the query caused (memory, CPU,
// a crash), the kill reason when the server killed it.
func (p *proc) death() error {
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		p.kill(errWorkerGone)
		<-p.exited
	}
	p.mu.Lock()
	killed := p.killed
	p.mu.Unlock()
	if killed != nil {
		return killed
	}
	return exitError(p.cmd.ProcessState, p.stderr.Head()+"\n"+p.stderr.String())
}

// exitError describes a worker that ended by itself.
func exitError(st *os.ProcessState, stderr string) error {
	low := strings.ToLower(stderr)
	outOfMemory := strings.Contains(low, "bad_alloc") || strings.Contains(low, "out of memory") ||
		strings.Contains(low, "cannot allocate memory")
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		switch sig := ws.Signal(); {
		case sig == syscall.SIGXCPU:
			return wire.CPULimitError()
		case sig == syscall.SIGKILL && !outOfMemory:
			return &datachat.QueryError{Kind: datachat.KindMemory, Message: "the query's engine process was killed from outside, most likely because the machine ran short of memory; make the query lighter (aggregate, filter, fewer or smaller columns)"}
		case outOfMemory:
			return &datachat.QueryError{Kind: datachat.KindMemory, Message: "the query used more memory than allowed and was stopped; make it lighter (aggregate or filter first, fewer or smaller columns, no huge strings or lists)"}
		default:
			return &datachat.QueryError{Kind: datachat.KindOther, Message: fmt.Sprintf("the SQL engine crashed on this query (%s) and was restarted; the query did not run: try another form of it", sig)}
		}
	}
	if outOfMemory {
		return &datachat.QueryError{Kind: datachat.KindMemory, Message: "the query used more memory than allowed and was stopped; make it lighter (aggregate or filter first, fewer or smaller columns, no huge strings or lists)"}
	}
	// Go's runtime turns a crash in DuckDB's C++ (SIGSEGV, SIGABRT) into a
	// goroutine dump and exit status 2.
	for _, crash := range []string{"SIGSEGV", "SIGABRT", "SIGBUS", "SIGILL", "SIGFPE", "terminate called", "fatal error:"} {
		if strings.Contains(stderr, crash) {
			return &datachat.QueryError{Kind: datachat.KindOther, Message: "the SQL engine crashed on this input and was restarted; nothing else was affected: try another form of it"}
		}
	}
	if strings.Contains(stderr, "goroutine ") && st.ExitCode() == 2 {
		// A Go runtime's fatal error whose first line did not survive.
		return &datachat.QueryError{Kind: datachat.KindOther, Message: "the SQL engine crashed on this input and was restarted; nothing else was affected: try another form of it"}
	}
	return &datachat.QueryError{Kind: datachat.KindOther, Message: fmt.Sprintf("the SQL engine stopped unexpectedly on this query (%s) and was restarted; nothing else was affected: try another form of it", st)}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// tailWriter keeps the first and the last max bytes written to it: a Go
// runtime's fatal error says what it is on its first line and then dumps
// every goroutine, so the tail alone loses the cause.
type tailWriter struct {
	mu   sync.Mutex
	max  int
	head []byte
	b    []byte
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := min(len(p), t.max-len(t.head)); n > 0 {
		t.head = append(t.head, p[:n]...)
	}
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

// String returns the last max bytes written.
func (t *tailWriter) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// Head returns the first max bytes written.
func (t *tailWriter) Head() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.head)
}
