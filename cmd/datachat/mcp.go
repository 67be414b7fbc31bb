package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
// tools over stdio, acting for user local on one of its stored conversations,
// or on a new conversation holding the given files. Stdout carries only the
// protocol; logs go to stderr.
func (m *Main) runMCP(ctx context.Context) error {
	st, err := m.openStore(ctx)
	if err != nil {
		return err
	}
	ws, err := m.newWorkspace(st, m.Config.DataDir, m.Config.Retrieval)
	if err != nil {
		return err
	}
	user, err := st.EnsureUser(ctx, localUser)
	if err != nil {
		return err
	}
	convID, err := m.mcpConversation(ctx, ws, user, m.flags.conversation, m.flags.data)
	if err != nil {
		return err
	}
	// Named on stderr, so the conversation can be reopened (--conversation) or
	// seen in the web page with a key of user local.
	fmt.Fprintf(m.Stderr, "datachat mcp: serving conversation %s of user %s on stdio\n", convID, user.Name)
	srv := mcpserver.New(mcpserver.Options{
		Workspace: ws, Store: st, User: user, Conversation: convID,
		Logger: m.Logger, Sources: m.newSources(st),
	})
	err = srv.Run(ctx, answerAll{&mcp.IOTransport{Reader: os.Stdin, Writer: nopWriteCloser{m.Stdout}}})
	if err != nil && (errors.Is(err, io.EOF) || errors.Is(err, mcp.ErrConnectionClosed) || ctx.Err() != nil) {
		return nil // the client went away, or we were told to stop
	}
	return err
}

// mcpConversation returns the stored conversation the tools work on, or a new
// one with the given files loaded into it.
func (m *Main) mcpConversation(ctx context.Context, ws *workspace.Workspace, user *datachat.User, id string, data []string) (string, error) {
	if id != "" {
		c, err := ws.Store.Conversation(ctx, user.ID, id)
		if err != nil {
			return "", fmt.Errorf("mcp: --conversation %s: %s", id, datachat.ErrorMessage(err))
		}
		return c.ID, nil
	}
	c := &datachat.Conversation{UserID: user.ID, Title: "MCP session"}
	if err := ws.Store.CreateConversation(ctx, c); err != nil {
		return "", err
	}
	for _, src := range data {
		ds, err := ws.AddFromPath(ctx, c.ID, src)
		if err != nil {
			return "", fmt.Errorf("mcp: --data %s: %s", src, datachat.ErrorMessage(err))
		}
		for _, d := range ds {
			fmt.Fprintf(m.Stderr, "table %s: %s, %d rows\n", d.Name, d.Source, d.RowCount)
		}
	}
	return c.ID, nil
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
