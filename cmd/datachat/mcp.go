package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

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
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	conversation := fs.String("conversation", "", "the id of a stored conversation of user "+localUser+" to work on")
	var data listFlag
	fs.Var(&data, "data", "a Parquet or CSV file or URL to load into a new conversation (repeatable)")
	if err := fs.Parse(m.Args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("mcp: unexpected arguments %q: want [--conversation ID | --data FILE_OR_URL…]", fs.Args())
	}
	if *conversation != "" && len(data) > 0 {
		return errors.New("mcp: use --conversation or --data, not both")
	}
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
	convID, err := m.mcpConversation(ctx, ws, user, *conversation, data)
	if err != nil {
		return err
	}
	// Named on stderr, so the conversation can be reopened (--conversation) or
	// seen in the web page with a key of user local.
	fmt.Fprintf(m.Stderr, "datachat mcp: serving conversation %s of user %s on stdio\n", convID, user.Name)
	srv := mcpserver.New(mcpserver.Options{
		Workspace: ws, Store: st, User: user, Conversation: convID,
		Logger: m.Logger,
	})
	err = srv.Run(ctx, &mcp.IOTransport{Reader: os.Stdin, Writer: nopWriteCloser{m.Stdout}})
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
		ds, err := m.addData(ctx, ws, c.ID, src)
		if err != nil {
			return "", fmt.Errorf("mcp: --data %s: %s", src, datachat.ErrorMessage(err))
		}
		for _, d := range ds {
			fmt.Fprintf(m.Stderr, "table %s: %s, %d rows\n", d.Name, d.Source, d.RowCount)
		}
	}
	return c.ID, nil
}

// nopWriteCloser keeps the protocol from closing stdout.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
