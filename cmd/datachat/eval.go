package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"golang.org/x/term"

	"datachat/internal/eval"
	"datachat/internal/workspace"
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
	suite, err := eval.Load(ctx, m.Args[0])
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return errors.New("eval: interrupted")
		}
		return err
	}
	ws, runner, err := m.scratchRunner()
	if err != nil {
		return err
	}
	// A suite's database sources are added to the scratch store, sealed
	// with a key of its own there.
	sources := &workspace.Sources{Store: ws.Store, DataDir: ws.Loader.Dir(), Options: m.sourceOptions(), Logger: m.Logger}
	m.closers = append(m.closers, sources.Close)
	runner.Sources = sources
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
		Sources: sources, Getenv: func(k string) string { v, _ := m.Env(k); return v },
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
			abstain := ""
			if r.AbstainMatch != nil {
				abstain = ", abstention " + matchWord(r.AbstainMatch)
			}
			fmt.Fprintf(m.Stderr, "[%d/%d] %s: execution %s, answer %s%s, %d tool calls, %.1f s%s\n", i+1, total, q.ID,
				matchWord(r.ExecutionMatch), matchWord(r.AnswerMatch), abstain, r.ToolCalls, r.Seconds, errorNote(r.Error))
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
	return evalFailure(rep, f.minExecAccuracy)
}

// evalFailure is the error that makes eval exit 1, for CI: questions that
// failed with an error, or an execution accuracy below min (checked by
// parseCommand; "" for none).
func evalFailure(rep *eval.Report, min string) error {
	var why, failed []string
	for _, q := range rep.Questions {
		if q.Error != nil {
			failed = append(failed, q.ID)
		}
	}
	if len(failed) > 0 {
		why = append(why, fmt.Sprintf("%d of %d questions failed with an error (%s)", len(failed), len(rep.Questions), strings.Join(failed, ", ")))
	}
	if min != "" {
		want, _ := parseShare(min)
		switch acc := rep.ExecutionAccuracy; {
		case acc == nil:
			why = append(why, "no question has an expected result to check the execution against, so --min-execution-accuracy cannot be met")
		case *acc+1e-9 < want:
			why = append(why, fmt.Sprintf("execution accuracy %.1f%% is below --min-execution-accuracy %.1f%%", *acc*100, want*100))
		}
	}
	if len(why) == 0 {
		return nil
	}
	return errors.New("eval: " + strings.Join(why, "; "))
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

// isTerminal reports whether w is a terminal (not merely a character
// device such as /dev/null), where a person reads: a progress line can be
// redrawn in place, and serve logs text.
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
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

// parseShare reads --min-execution-accuracy: a share from 0 to 1 (0.8) or a
// percentage (80%).
func parseShare(s string) (float64, error) {
	t := strings.TrimSpace(s)
	pct := strings.HasSuffix(t, "%")
	v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(t, "%")), 64)
	if err == nil && pct {
		v /= 100
	}
	if err != nil || math.IsNaN(v) || v < 0 || v > 1 {
		return 0, fmt.Errorf("%q: want a share from 0 to 1 (0.8) or a percentage (80%%)", s)
	}
	return v, nil
}
