package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"datachat/internal/eval"
)

// runEval is `datachat eval SUITE [--out FILE] [--no-dictionary]
// [--no-examples]`: every question of the suite through a chat turn with the
// configured model, each in a new conversation of a temporary workspace,
// scored; and `datachat eval --compare A B`: two results side by side.
func (m *Main) runEval(ctx context.Context) error {
	f := m.flags
	if f.compare {
		a, err := eval.ReadReport(m.Args[0])
		if err != nil {
			return err
		}
		b, err := eval.ReadReport(m.Args[1])
		if err != nil {
			return err
		}
		return eval.Compare(m.Stdout, a, b)
	}
	suite, err := eval.Load(m.Args[0])
	if err != nil {
		return err
	}
	ws, runner, err := m.scratchRunner("datachat-eval-")
	if err != nil {
		return err
	}
	// The server's per-user limits are not the measure's: a suite runs as
	// fast as the model answers.
	runner.RateLimitRPM, runner.TokensPerDay = 0, 0
	user, err := ws.Store.EnsureUser(ctx, localUser)
	if err != nil {
		return err
	}
	tty := isTerminal(m.Stderr)
	rep, err := eval.Run(ctx, suite, eval.Options{
		Workspace: ws, Chat: runner, User: user, NoDictionary: f.noDictionary, NoExamples: f.noExamples,
		Progress: func(i, total int, q *eval.Question, r *eval.Result) {
			if r == nil {
				if tty {
					fmt.Fprintf(m.Stderr, "\r\033[K[%d/%d] %s: %s", i+1, total, q.ID, clip(q.Question, 60))
				}
				return
			}
			if tty {
				fmt.Fprint(m.Stderr, "\r\033[K")
			}
			fmt.Fprintf(m.Stderr, "[%d/%d] %s: execution %s, answer %s, %d tool calls, %.1f s%s\n", i+1, total, q.ID,
				matchWord(r.ExecutionMatch), matchWord(r.AnswerMatch), r.ToolCalls, r.Seconds, errorNote(r.Error))
		},
	})
	if err != nil {
		if tty {
			fmt.Fprintln(m.Stderr)
		}
		if errors.Is(err, context.Canceled) {
			return errors.New("eval: interrupted")
		}
		return fmt.Errorf("eval: %w", err)
	}
	fmt.Fprintln(m.Stderr)
	if err := rep.WriteTable(m.Stdout); err != nil {
		return err
	}
	if f.out != "" {
		if err := rep.WriteJSON(f.out); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
		fmt.Fprintf(m.Stderr, "results written to %s\n", f.out)
	}
	return nil
}

func matchWord(b *bool) string {
	switch {
	case b == nil:
		return "n/a"
	case *b:
		return "match"
	}
	return "no match"
}

func errorNote(e *string) string {
	if e == nil {
		return ""
	}
	return " (error: " + clip(*e, 80) + ")"
}

func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// isTerminal reports whether w is a terminal, where a progress line can be
// redrawn in place.
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// parseInterspersed parses fs over args, letting flags come after the
// positional arguments too (datachat eval SUITE --out FILE), and returns the
// positional arguments. "--" ends the flags.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}
