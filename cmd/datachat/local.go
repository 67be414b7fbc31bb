package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"datachat"
	"datachat/internal/chat"
	"datachat/internal/duckdb"
	"datachat/internal/scratch"
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
	dir, err := m.localDir()
	if err != nil {
		return err
	}
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
	capped := false
	if res.Truncated {
		if n := m.flags.maxRows; n > 0 && res.RowCount == n {
			capped = true
		} else {
			// Cut by size, not by --max-rows: print nothing rather than
			// part of an export.
			return fmt.Errorf("sql: the result is larger than the %d MiB a query may return (%d rows of it were read, and nothing was printed); narrow it with WHERE, fewer columns or LIMIT, or print it in parts", sqlResultMB, res.RowCount)
		}
	}
	switch format {
	case "csv":
		err = duckdb.WriteCSV(m.Stdout, res)
	case "json":
		enc := json.NewEncoder(m.Stdout)
		enc.SetEscapeHTML(false)
		err = enc.Encode(res)
	default:
		err = duckdb.WriteTable(m.Stdout, res)
	}
	if err == nil && capped {
		fmt.Fprintf(m.Stderr, "(%d rows printed, as --max-rows %d says; the result had more)\n", res.RowCount, m.flags.maxRows)
	}
	return err
}

// sqlResultMB bounds the result of `datachat sql`, which has no row cap: a
// result is held whole in the memory of the worker and of the command, and
// crosses between them in one frame (the server's cap, the largest the
// worker protocol carries with room to spare).
const sqlResultMB = 64

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
			return nil, fileError("--data", src, err)
		}
		for _, d := range ds {
			fmt.Fprintf(m.Stderr, "table %s: %s, %d rows\n", d.Name, d.Source, d.RowCount)
			for _, n := range d.Notes {
				fmt.Fprintf(m.Stderr, "  %s\n", n)
			}
		}
	}
	return conv, nil
}

// localDir returns the temporary directory of a command that keeps nothing
// (sql, ask, eval, mcp --data), removed when it ends. It is a directory of
// the process's own (internal/scratch) under $TMPDIR/datachat-UID, where each
// such command first removes what runs that were killed left: nothing piles
// up, even from an agent that kills its MCP server. Where that parent is not
// safely this user's own (another user made it, or others may write in it),
// the directory is a fresh one of os.MkdirTemp, which only a clean end
// removes.
func (m *Main) localDir() (string, error) {
	parent := filepath.Join(os.TempDir(), fmt.Sprintf("datachat-%d", os.Getuid()))
	for try := 0; ownDir(parent); try++ {
		if _, err := scratch.Sweep(parent); err != nil {
			m.Logger.Warn("remove what killed runs left", slog.String("dir", parent), slog.String("error", err.Error()))
		}
		d, err := scratch.Claim(parent)
		if errors.Is(err, fs.ErrNotExist) && try < 3 {
			continue // another run removed the parent as it ended
		}
		if err != nil {
			break
		}
		m.closers = append(m.closers, func() error {
			err := d.Release()
			os.Remove(parent) // when no other run uses it
			return err
		})
		return d.Path(), nil
	}
	dir, err := os.MkdirTemp("", "datachat-"+m.Command+"-")
	if err != nil {
		return "", err
	}
	m.closers = append(m.closers, func() error { return os.RemoveAll(dir) })
	return dir, nil
}

// ownDir makes dir (mode 0700) if it does not exist, and reports whether it
// is a directory, not a link, of this user's that no one else may write in.
func ownDir(dir string) bool {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return false
	}
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() || fi.Mode().Perm()&0o022 != 0 {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Getuid()
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
func (m *Main) scratchRunner() (*workspace.Workspace, *chat.Runner, error) {
	dir, err := m.localDir()
	if err != nil {
		return nil, nil, err
	}
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
		ev.SuggestedAction = action + ", then run the command again."
		return nil, nil, errors.New(ev.Text())
	}
	return ws, runner, nil
}

// runAsk is `datachat ask --data FILE_OR_URL… "question"`: one turn in the
// terminal, the answer streamed to stdout and tool calls to stderr.
func (m *Main) runAsk(ctx context.Context) error {
	data, docs := m.flags.data, m.flags.docs
	ws, runner, err := m.scratchRunner()
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
	ans := &answerPrinter{m: m}
	sink := ans.event
	out, err := runner.Send(ctx, user, conv.ID, m.Args[0], chat.TurnOptions{}, sink)
	for err == nil && out != nil && out.Confirmation != nil {
		c := out.Confirmation
		fmt.Fprintf(m.Stderr, "\n? %s\n  %s %s\n  approve? [y/N] ", c.Explanation, c.Action, c.Parameters)
		approved := readYes(os.Stdin)
		out, err = runner.Confirm(ctx, user, conv.ID, c.ID, approved, "", sink)
	}
	fmt.Fprintln(m.Stdout)
	if err != nil {
		return errors.New(chat.ErrorEventFor(err).Text())
	}
	if c := out.Complete; c != nil {
		// The sources the answer's [n] cite follow it, as the page shows
		// them on the citations.
		if cited := citedSources(ans.answer.String(), len(c.Sources)); len(cited) > 0 {
			fmt.Fprintln(m.Stdout, "\nSources:")
			for _, n := range cited {
				fmt.Fprintf(m.Stdout, "  [%d] %s\n", n, c.Sources[n-1].Citation())
			}
		}
		fmt.Fprintf(m.Stderr, "(%s; %d input + %d output tokens)\n", c.Status, c.InputTokens, c.OutputTokens)
	}
	return nil
}

// answerPrinter shows a turn's events in the terminal: the answer on stdout,
// everything else on stderr. The answer's parts that a tool call separates
// are separate paragraphs, as the page shows them, not run together ("…by
// day.Tips are…").
type answerPrinter struct {
	m         *Main
	answer    strings.Builder
	text      bool   // answer text was printed
	tail      string // the last two characters printed
	afterTool bool   // a tool call came since the last text
}

func (a *answerPrinter) event(ev chat.Event) {
	m := a.m
	switch d := ev.Data.(type) {
	case chat.TokenEvent:
		if d.Token == "" {
			return
		}
		if a.afterTool && a.text {
			a.write(chat.PartBreak(a.tail))
		}
		a.afterTool = false
		a.write(d.Token)
		a.answer.WriteString(d.Token)
		a.text = true
	case chat.ToolCallStartEvent:
		a.afterTool = true
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

func (a *answerPrinter) write(s string) {
	fmt.Fprint(a.m.Stdout, s)
	t := a.tail + s
	a.tail = t[max(0, len(t)-2):]
}

// citation is a citation in an answer: [1], [2, 3], [4-6] (the forms the
// page resolves).
var citation = regexp.MustCompile(`\[(\d+(?:\s*[,–-]\s*\d+)*)\]`)

// citedSources returns, in order, the numbers from 1 to n that the answer
// cites.
func citedSources(answer string, n int) []int {
	cited := make([]bool, n+1)
	mark := func(i int) {
		if i >= 1 && i <= n {
			cited[i] = true
		}
	}
	for _, loc := range citation.FindAllStringSubmatchIndex(answer, -1) {
		if strings.HasPrefix(answer[loc[1]:], "(") {
			continue // a Markdown link, [5](…), not a citation
		}
		for _, item := range strings.Split(answer[loc[2]:loc[3]], ",") {
			lo, hi, isRange := strings.Cut(strings.ReplaceAll(strings.TrimSpace(item), "–", "-"), "-")
			a, err := strconv.Atoi(strings.TrimSpace(lo))
			if err != nil {
				continue
			}
			b := a
			if isRange {
				if b, err = strconv.Atoi(strings.TrimSpace(hi)); err != nil || b < a || b-a > n {
					continue
				}
			}
			for i := a; i <= b; i++ {
				mark(i)
			}
		}
	}
	var out []int
	for i := 1; i <= n; i++ {
		if cited[i] {
			out = append(out, i)
		}
	}
	return out
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
			return fileError("--doc", p, err)
		}
		d, err := ws.AddDocument(ctx, conversationID, f, filepath.Base(p), nil)
		f.Close()
		if err != nil {
			return fileError("--doc", p, err)
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

// fileError is the error about the file or URL src of a flag: its message,
// which names the file ("empty.csv is empty"), else the message after the
// flag and src.
func fileError(flag, src string, err error) error {
	msg := strings.TrimPrefix(datachat.ErrorMessage(err), "open ")
	if strings.Contains(msg, src) || !strings.Contains(src, "://") && strings.Contains(msg, filepath.Base(src)) {
		return errors.New(msg)
	}
	return fmt.Errorf("%s %s: %s", flag, src, msg)
}

// plural is "1 page", "2 pages".
func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
