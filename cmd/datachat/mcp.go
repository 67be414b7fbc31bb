package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"datachat"
	"datachat/internal/mcpserver"
	"datachat/internal/workspace"
)

// localUser is whom `datachat mcp` acts for.
const localUser = "local"

// runMCP is `datachat mcp [--conversation ID | --data FILE_OR_URL…]`: the MCP
// tools over stdio, acting for user local on one of its stored conversations
// (--conversation, in the data directory), or on the given files in a
// temporary workspace that keeps nothing, as sql and ask do: agents restart
// their MCP servers often, and each start must not leave a conversation and
// copies of the files behind. Stdout carries only the protocol; logs go to
// stderr.
func (m *Main) runMCP(ctx context.Context) error {
	var (
		ws      *workspace.Workspace
		user    *datachat.User
		convID  string
		sources datachat.DBSourceService
		err     error
	)
	if id := m.flags.conversation; id != "" {
		st, err := m.openStore(ctx)
		if err != nil {
			return err
		}
		if ws, err = m.newWorkspace(st, m.Config.DataDir, m.Config.Retrieval); err != nil {
			return err
		}
		if user, err = st.EnsureUser(ctx, localUser); err != nil {
			return err
		}
		c, err := st.Conversation(ctx, user.ID, id)
		if err != nil {
			return fmt.Errorf("mcp: --conversation %s: %s", id, datachat.ErrorMessage(err))
		}
		convID, sources = c.ID, m.newSources(st)
		// Named on stderr, as the page shows it to a key of user local.
		fmt.Fprintf(m.Stderr, "datachat mcp: serving conversation %s of user %s on stdio\n", convID, user.Name)
	} else {
		dir, err := m.localDir()
		if err != nil {
			return err
		}
		if ws, err = m.newWorkspaceAt(dir); err != nil {
			return err
		}
		conv, err := m.localConversation(ctx, ws, "datachat mcp", m.flags.data)
		if err != nil {
			return fmt.Errorf("mcp: %w", err)
		}
		if user, err = ws.Store.EnsureUser(ctx, localUser); err != nil {
			return err
		}
		convID = conv.ID
		what := "the --data files"
		if len(m.flags.data) == 0 {
			what = "an empty workspace (load_dataset adds to it)"
		}
		fmt.Fprintf(m.Stderr, "datachat mcp: serving %s on stdio\n", what)
	}
	out := &lockedWriter{w: m.Stdout}
	srv := mcpserver.New(mcpserver.Options{
		Workspace: ws, Store: ws.Store, User: user, Conversation: convID,
		Logger: m.Logger, Sources: sources, SaveAsMaxRows: m.Config.SaveAsMaxRows,
	})
	var stdin io.Reader = os.Stdin
	if m.Stdin != nil {
		stdin = m.Stdin
	}
	in := jsonLines(stdin, out, m.Logger)
	err = srv.Run(ctx, answerAll{&mcp.IOTransport{Reader: in, Writer: nopWriteCloser{out}}})
	if err != nil && (errors.Is(err, io.EOF) || errors.Is(err, mcp.ErrConnectionClosed) || ctx.Err() != nil) {
		return nil // the client went away, or we were told to stop
	}
	return err
}

// answerAll is a transport on which a client's end of input does not drop
// the requests it sent before it: every one read is answered first.
//
// The SDK's connection treats a read error (io.EOF when stdin closes) as the
// end of the session: it cancels the requests still running and refuses to
// write their answers. A client that writes its requests and closes stdin at
// once (a script piping a file in) got no answer to any of them. answerAll
// holds the end of input back from the SDK until every request read has been
// answered (or the connection is closed, or ctx ends).
type answerAll struct{ mcp.Transport }

func (t answerAll) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &answeringConn{Connection: c, pending: map[jsonrpc.ID]bool{}, closed: make(chan struct{})}, nil
}

// answeringConn counts the requests read and not yet answered.
type answeringConn struct {
	mcp.Connection

	mu        sync.Mutex
	pending   map[jsonrpc.ID]bool
	answered  chan struct{} // closed when pending empties; nil while none is waited for
	closed    chan struct{}
	closeOnce sync.Once
}

func (c *answeringConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if err != nil {
		c.waitAnswered(ctx)
		return nil, err
	}
	if req, ok := msg.(*jsonrpc.Request); ok {
		c.mu.Lock()
		switch {
		case req.IsCall() && req.Method != "subscriptions/listen": // a listen lasts as long as the session
			c.pending[req.ID] = true
		case req.Method == "notifications/cancelled":
			// The client no longer wants that answer.
			var p struct {
				RequestID any `json:"requestId"`
			}
			if json.Unmarshal(req.Params, &p) == nil {
				if id, err := jsonrpc.MakeID(p.RequestID); err == nil {
					c.answer(id)
				}
			}
		}
		c.mu.Unlock()
	}
	return msg, nil
}

func (c *answeringConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	err := c.Connection.Write(ctx, msg)
	if resp, ok := msg.(*jsonrpc.Response); ok {
		c.mu.Lock()
		c.answer(resp.ID)
		c.mu.Unlock()
	}
	return err
}

// answer marks a request answered; c.mu is held.
func (c *answeringConn) answer(id jsonrpc.ID) {
	delete(c.pending, id)
	if len(c.pending) == 0 && c.answered != nil {
		close(c.answered)
		c.answered = nil
	}
}

// waitAnswered returns once every request read has been answered.
func (c *answeringConn) waitAnswered(ctx context.Context) {
	c.mu.Lock()
	if len(c.pending) == 0 {
		c.mu.Unlock()
		return
	}
	if c.answered == nil {
		c.answered = make(chan struct{})
	}
	answered := c.answered
	c.mu.Unlock()
	select {
	case <-answered:
	case <-c.closed:
	case <-ctx.Done():
	}
}

func (c *answeringConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Connection.Close()
}

// nopWriteCloser keeps the protocol from closing stdout.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// lockedWriter serialises writes: the SDK's answers and jsonLines' errors
// share stdout, one whole line per Write.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// maxMCPLine is the longest line read from an MCP client: the SDK's own cap
// on a message.
const maxMCPLine = mcp.DefaultMaxLineLength

// jsonLines reads an MCP client's messages, one a line, from r and passes
// those that are JSON-RPC messages on to the SDK through the reader it
// returns. A line that is not JSON is answered on w with -32700 Parse error,
// and one that is JSON but not a message the session takes with -32600
// Invalid Request (under its id, when it has a usable one); either way the
// session goes on. Without this, the SDK's stdio transport ended the session
// at the first such line, with no answer.
func jsonLines(r io.Reader, w io.Writer, logger *slog.Logger) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		br := bufio.NewReaderSize(r, 64<<10)
		var version string // the protocol version the client asked for
		for {
			line, tooLong, err := readLine(br, maxMCPLine)
			if t := bytes.TrimSpace(line); len(t) > 0 || tooLong {
				fwd, why := checkLine(t, tooLong, &version)
				if why != nil {
					logger.Warn("mcp: a line from the client is not a message", slog.String("error", why.Message))
					if _, werr := w.Write(append(why.JSON(), '\n')); werr != nil {
						pw.CloseWithError(werr)
						return
					}
				} else if _, werr := pw.Write(append(fwd, '\n')); werr != nil {
					return // the session ended
				}
			}
			if err != nil {
				if errors.Is(err, io.EOF) {
					pw.Close()
				} else {
					pw.CloseWithError(err)
				}
				return
			}
		}
	}()
	return pr
}

// readLine reads one line (without its newline) of at most max bytes; a
// longer line is read to its end and dropped, with tooLong set.
func readLine(br *bufio.Reader, max int) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > max+1 { // +1: the newline
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimSuffix(line, []byte("\n")), tooLong, err
	}
}

// protocolNoBatches is the first MCP protocol version without JSON-RPC
// batches; the SDK ends a session that sends one.
const protocolNoBatches = "2025-06-18"

// checkLine returns the line to pass on to the SDK, or the error answering
// it. version is the protocol version the client's initialize asked for,
// noted here.
func checkLine(line []byte, tooLong bool, version *string) ([]byte, *mcpserver.MessageError) {
	if tooLong {
		return nil, &mcpserver.MessageError{Code: jsonrpc.CodeParseError, Message: fmt.Sprintf("Parse error: a line is longer than %d bytes; send one JSON-RPC message a line", maxMCPLine)}
	}
	if e := mcpserver.CheckMessage(line); e != nil {
		return nil, e
	}
	if line[0] == '[' {
		var batch []json.RawMessage
		json.Unmarshal(line, &batch)
		switch {
		case len(batch) == 0:
			return nil, &mcpserver.MessageError{Code: jsonrpc.CodeInvalidRequest, Message: "Invalid Request: an empty batch"}
		case *version == "" || *version >= protocolNoBatches:
			return nil, &mcpserver.MessageError{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf("Invalid Request: JSON-RPC batches are not part of MCP from protocol version %s on; send one message a line", protocolNoBatches)}
		}
		for _, m := range batch {
			if e := mcpserver.CheckMessage(m); e != nil {
				e.ID = nil
				e.Message = "Invalid Request: in the batch: " + e.Message
				e.Code = jsonrpc.CodeInvalidRequest
				return nil, e
			}
		}
		return line, nil
	}
	if msg, err := jsonrpc.DecodeMessage(line); err == nil {
		if req, ok := msg.(*jsonrpc.Request); ok && req.Method == "initialize" {
			var p struct {
				ProtocolVersion string `json:"protocolVersion"`
			}
			if json.Unmarshal(req.Params, &p) == nil {
				*version = p.ProtocolVersion
			}
		}
	}
	return line, nil
}
