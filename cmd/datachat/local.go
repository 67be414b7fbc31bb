package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"datachat"
	"datachat/internal/chat"
	"datachat/internal/duckdb"
	"datachat/internal/sqlite"
	"datachat/internal/workspace"
)

// listFlag is a flag that may be given several times, one value each.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// runSQL is `datachat sql [--data FILE_OR_URL]… [--format table|csv|json] "SELECT …"`:
// the sandboxed engine over the given files, with no LLM and no database.
func (m *Main) runSQL(ctx context.Context) error {
	data, format := m.flags.data, m.flags.format
	dir, err := os.MkdirTemp("", "datachat-sql-")
	if err != nil {
		return err
	}
	m.closers = append(m.closers, func() error { return os.RemoveAll(dir) })
	ws, err := m.newWorkspaceAt(dir)
	if err != nil {
		return err
	}
	conv, err := m.localConversation(ctx, ws, "datachat sql", data)
	if err != nil {
		return fmt.Errorf("sql: %w", err)
	}
	res, err := ws.Query(ctx, conv.ID, m.Args[0])
	if err != nil {
		return fmt.Errorf("sql: %s", datachat.ErrorMessage(err))
	}
	switch format {
	case "csv":
		return duckdb.WriteCSV(m.Stdout, res)
	case "json":
		enc := json.NewEncoder(m.Stdout)
		enc.SetEscapeHTML(false)
		return enc.Encode(res)
	}
	if err := duckdb.WriteTable(m.Stdout, res); err != nil {
		return err
	}
	if res.Truncated {
		fmt.Fprintf(m.Stderr, "(%d rows shown; the result had more)\n", res.RowCount)
	}
	return nil
}

// localConversation creates a conversation of the user "local" holding the
// --data files and URLs, each reported on stderr as its tables.
func (m *Main) localConversation(ctx context.Context, ws *workspace.Workspace, title string, data []string) (*datachat.Conversation, error) {
	user, err := ws.Store.EnsureUser(ctx, "local")
	if err != nil {
		return nil, err
	}
	conv := &datachat.Conversation{UserID: user.ID, Title: title}
	if err := ws.Store.CreateConversation(ctx, conv); err != nil {
		return nil, err
	}
	for _, src := range data {
		ds, err := ws.AddFromPath(ctx, conv.ID, src)
		if err != nil {
			return nil, fmt.Errorf("--data %s: %s", src, datachat.ErrorMessage(err))
		}
		for _, d := range ds {
			fmt.Fprintf(m.Stderr, "table %s: %s, %d rows\n", d.Name, d.Source, d.RowCount)
		}
	}
	return conv, nil
}

// newWorkspaceAt builds a workspace over a fresh SQLite store in dir, a
// temporary directory of sql and ask, which keep nothing.
func (m *Main) newWorkspaceAt(dir string) (*workspace.Workspace, error) {
	fmt.Fprintf(m.Stderr, "datachat: no data directory or database: %s keeps nothing (it works in %s, removed when it ends)\n", m.Command, dir)
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "datachat.db"))
	if err != nil {
		return nil, err
	}
	m.closers = append(m.closers, st.Close)
	if err := st.Migrate(context.Background()); err != nil {
		return nil, err
	}
	// The store and its documents last one command: their index is the
	// embedded one in dir, whatever DATACHAT_RETRIEVAL says for the server.
	return m.newWorkspace(st, dir, "embedded")
}

// scratchRunner makes a workspace in a temporary directory, removed when the
// command ends, and a chat runner on it: for the commands that run turns
// once (ask, eval). Without a model it says what to set, for a command that
// is run again rather than restarted.
func (m *Main) scratchRunner(prefix string) (*workspace.Workspace, *chat.Runner, error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, nil, err
	}
	m.closers = append(m.closers, func() error { return os.RemoveAll(dir) })
	ws, err := m.newWorkspaceAt(dir)
	if err != nil {
		return nil, nil, err
	}
	runner, err := m.newRunner(ws.Store, ws)
	if err != nil {
		return nil, nil, err
	}
	if runner.Model == nil {
		// The chat's advice is the server's ("…, then restart datachat"):
		// a command run once is simply run again.
		ev := chat.ErrorEventFor(chat.NotConfiguredError())
		action, _, _ := strings.Cut(ev.SuggestedAction, ", then restart")
		return nil, nil, fmt.Errorf("%s %s %s, then run the command again.", ev.Message, ev.Reason, strings.TrimSuffix(action, "."))
	}
	return ws, runner, nil
}

// runAsk is `datachat ask --data FILE_OR_URL… "question"`: one turn in the
// terminal, the answer streamed to stdout and tool calls to stderr.
func (m *Main) runAsk(ctx context.Context) error {
	data, docs := m.flags.data, m.flags.docs
	ws, runner, err := m.scratchRunner("datachat-ask-")
	if err != nil {
		return err
	}
	conv, err := m.localConversation(ctx, ws, "datachat ask", data)
	if err != nil {
		return err
	}
	user, err := ws.Store.EnsureUser(ctx, "local")
	if err != nil {
		return err
	}
	if len(docs) > 0 {
		if err := m.addDocs(ctx, ws, conv.ID, docs); err != nil {
			return err
		}
	}
	sink := func(ev chat.Event) { m.printEvent(ev) }
	out, err := runner.Send(ctx, user, conv.ID, m.Args[0], chat.TurnOptions{}, sink)
	for err == nil && out != nil && out.Confirmation != nil {
		c := out.Confirmation
		fmt.Fprintf(m.Stderr, "\n? %s\n  %s %s\n  approve? [y/N] ", c.Explanation, c.Action, c.Parameters)
		approved := readYes(os.Stdin)
		out, err = runner.Confirm(ctx, user, conv.ID, c.ID, approved, "", sink)
	}
	fmt.Fprintln(m.Stdout)
	if err != nil {
		ev := chat.ErrorEventFor(err)
		return fmt.Errorf("%s", strings.TrimSpace(strings.Join([]string{ev.Message, ev.Reason, ev.SuggestedAction}, " ")))
	}
	if c := out.Complete; c != nil {
		fmt.Fprintf(m.Stderr, "(%s; %d input + %d output tokens)\n", c.Status, c.InputTokens, c.OutputTokens)
		if len(c.Sources) > 0 {
			fmt.Fprintln(m.Stderr, "sources:")
			for i, s := range c.Sources {
				fmt.Fprintf(m.Stderr, "  [%d] %s\n", i+1, s.Citation())
			}
		}
	}
	return nil
}

// printEvent shows a turn's events in the terminal: the answer on stdout,
// everything else on stderr.
func (m *Main) printEvent(ev chat.Event) {
	switch d := ev.Data.(type) {
	case chat.TokenEvent:
		fmt.Fprint(m.Stdout, d.Token)
	case chat.ToolCallStartEvent:
		fmt.Fprintf(m.Stderr, "\n→ %s %s\n", d.Tool, d.Args)
	case chat.ToolCallResultEvent:
		if !d.OK {
			fmt.Fprintf(m.Stderr, "✗ %s: %s\n", d.Tool, d.Error)
		} else if d.RowCount != nil {
			fmt.Fprintf(m.Stderr, "✓ %d rows in %.0f ms\n", *d.RowCount, *d.ElapsedMS)
		} else {
			fmt.Fprintf(m.Stderr, "✓ %s\n", firstLine(d.Content))
		}
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

func readYes(r io.Reader) bool {
	line, _ := bufio.NewReader(r).ReadString('\n')
	line = strings.ToLower(strings.TrimSpace(line))
	return line == "y" || line == "yes"
}

// addDocs adds --doc files to the conversation.
func (m *Main) addDocs(ctx context.Context, ws *workspace.Workspace, conversationID string, paths []string) error {
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return fmt.Errorf("--doc: %w", err)
		}
		d, err := ws.AddDocument(ctx, conversationID, f, filepath.Base(p), nil)
		f.Close()
		if err != nil {
			return fmt.Errorf("--doc %s: %s", p, datachat.ErrorMessage(err))
		}
		// A document without pages (Markdown, HTML, text) is "text".
		pages := "text"
		if d.Pages > 0 {
			pages = plural(d.Pages, "page")
		}
		fmt.Fprintf(m.Stderr, "document %s: %s, %s\n", d.Name, pages, plural(d.Chunks, "chunk"))
	}
	return nil
}

// plural is "1 page", "2 pages".
func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
