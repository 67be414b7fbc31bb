package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"datachat"
)

// exportMarkdown is GET /api/conversations/{id}/export.md: the
// conversation as a Markdown file to keep or share — each question, each
// answer's text in order with the SQL it ran and the result it got (as a
// table), and the user's own queries.
func (s *Server) exportMarkdown(w http.ResponseWriter, r *http.Request) {
	conv, err := s.conversation(r)
	if err != nil {
		s.error(w, r, err)
		return
	}
	msgs, err := s.Store.Messages(r.Context(), conv.ID)
	if err != nil {
		s.error(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/markdown; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s.md"`, exportFileName(conv.Title)))
	w.Write([]byte(ConversationMarkdown(conv, msgs, time.Now())))
}

// exportFileName makes a file name of a title: letters, digits, - and _.
func exportFileName(title string) string {
	name := strings.Trim(nonFileChars.ReplaceAllString(strings.ToLower(title), "-"), "-")
	if len(name) > 60 {
		name = strings.TrimRight(name[:60], "-")
	}
	if name == "" {
		name = "conversation"
	}
	return name
}

var nonFileChars = regexp.MustCompile(`[^a-z0-9_]+`)

// ConversationMarkdown writes a conversation as Markdown.
func ConversationMarkdown(conv *datachat.Conversation, msgs []*datachat.Message, now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n", oneLine(conv.Title))
	fmt.Fprintf(&b, "_Exported from datachat on %s._\n", now.UTC().Format("2006-01-02 15:04 UTC"))
	for _, m := range msgs {
		calls := map[string]*datachat.ToolCall{}
		for i := range m.ToolCalls {
			calls[m.ToolCalls[i].CallID] = &m.ToolCalls[i]
		}
		switch m.Role {
		case datachat.RoleUser:
			if tc := firstTool(m.ToolCalls, "execute_sql"); tc != nil {
				b.WriteString("\n## You ran SQL\n\n")
				writeToolCall(&b, tc)
				continue
			}
			fmt.Fprintf(&b, "\n## You\n\n%s\n", strings.TrimSpace(m.Content))
		case datachat.RoleAssistant:
			b.WriteString("\n## datachat\n\n")
			done := map[*datachat.ToolCall]bool{}
			if len(m.Parts) == 0 {
				if t := strings.TrimSpace(m.Content); t != "" {
					b.WriteString(t + "\n\n")
				}
			}
			for _, p := range m.Parts {
				switch p.Type {
				case datachat.PartText:
					b.WriteString(p.Text)
				case datachat.PartToolCall:
					if tc := calls[p.CallID]; tc != nil && !done[tc] {
						done[tc] = true
						b.WriteString("\n\n")
						writeToolCall(&b, tc)
					}
				}
			}
			for i := range m.ToolCalls {
				if tc := &m.ToolCalls[i]; !done[tc] {
					b.WriteString("\n\n")
					writeToolCall(&b, tc)
				}
			}
			if m.Error != "" {
				fmt.Fprintf(&b, "\n\n> The answer failed: %s\n", oneLine(m.Error))
			}
			writeCited(&b, m)
			b.WriteString("\n")
		}
	}
	return strings.TrimRight(b.String(), "\n") + "\n"
}

// writeToolCall writes a tool call: execute_sql's SQL and result table;
// another tool by its name and arguments.
func writeToolCall(b *strings.Builder, tc *datachat.ToolCall) {
	var args map[string]any
	json.Unmarshal(tc.Args, &args)
	if tc.Tool != "execute_sql" {
		fmt.Fprintf(b, "_Used %s", tc.Tool)
		if len(tc.Args) > 0 && string(tc.Args) != "{}" {
			fmt.Fprintf(b, " (%s)", oneLine(string(tc.Args)))
		}
		b.WriteString("._\n\n")
		return
	}
	query, _ := args["query"].(string)
	if src, _ := args["source"].(string); src != "" {
		fmt.Fprintf(b, "SQL on %s:\n\n", src)
	}
	fence := "```"
	for strings.Contains(query, fence) {
		fence += "`"
	}
	fmt.Fprintf(b, "%ssql\n%s\n%s\n\n", fence, strings.TrimSpace(query), fence)
	result := strings.TrimPrefix(tc.Result, "The user approved. Result:\n")
	switch {
	case !tc.OK:
		msg := tc.Error
		if msg == "" {
			msg = result
		}
		fmt.Fprintf(b, "> The query failed: %s\n\n", oneLine(msg))
	case markdownTable(b, result):
	case strings.TrimSpace(result) != "":
		fmt.Fprintf(b, "```\n%s\n```\n\n", strings.TrimSpace(result))
	}
}

// pipeFoot is the last line of a result as the model reads it: "(N rows)"
// with notes after a semicolon.
var pipeFoot = regexp.MustCompile(`^\((\d+) rows?(;[^)]*)?\)$`)

// markdownTable writes a result in the model's "a | b" lines with a "(N
// rows)" line as a Markdown table, and reports whether it was one.
func markdownTable(b *strings.Builder, text string) bool {
	lines := strings.Split(strings.TrimRight(strings.ReplaceAll(text, "\r\n", "\n"), "\n"), "\n")
	if len(lines) < 2 || !pipeFoot.MatchString(strings.TrimSpace(lines[len(lines)-1])) {
		return false
	}
	head := strings.Split(lines[0], " | ")
	var rows [][]string
	for _, l := range lines[1 : len(lines)-1] {
		cells := strings.Split(l, " | ")
		if len(cells) != len(head) {
			return false
		}
		rows = append(rows, cells)
	}
	row := func(cells []string) {
		b.WriteString("|")
		for _, c := range cells {
			b.WriteString(" " + strings.ReplaceAll(oneLine(c), "|", `\|`) + " |")
		}
		b.WriteString("\n")
	}
	row(head)
	b.WriteString("|" + strings.Repeat(" --- |", len(head)) + "\n")
	for _, r := range rows {
		row(r)
	}
	fmt.Fprintf(b, "\n%s\n\n", strings.TrimSpace(lines[len(lines)-1]))
	return true
}

// citeMark is a citation in an answer's text: [n].
var citeMark = regexp.MustCompile(`\[(\d+)\]`)

// writeCited lists the excerpts an answer's text cites ([n] is Sources[n-1]).
func writeCited(b *strings.Builder, m *datachat.Message) {
	seen := map[int]bool{}
	var ns []int
	for _, g := range citeMark.FindAllStringSubmatch(m.Content, -1) {
		var n int
		fmt.Sscan(g[1], &n)
		if n >= 1 && n <= len(m.Sources) && !seen[n] {
			seen[n] = true
			ns = append(ns, n)
		}
	}
	if len(ns) == 0 {
		return
	}
	slices.Sort(ns)
	b.WriteString("\n\nSources:\n\n")
	for _, n := range ns {
		fmt.Fprintf(b, "%d. %s\n", n, oneLine(m.Sources[n-1].Citation()))
	}
}

func firstTool(calls []datachat.ToolCall, name string) *datachat.ToolCall {
	for i := range calls {
		if calls[i].Tool == name {
			return &calls[i]
		}
	}
	return nil
}

// oneLine joins a text's lines with spaces.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
