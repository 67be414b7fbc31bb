package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"datachat"
)

const auditUsage = `Usage: datachat audit [--since TIME] [--until TIME] [--user NAME] [--source NAME]
                      [--kind KIND] [--outcome OUTCOME] [--limit N] [--json]

Prints the audit log, newest first: every query on a database source (who,
in which conversation, the SQL, rows, time taken, how it ended), users
invited, reset, disabled, changed and removed, API keys created and revoked,
database sources added, changed, granted and removed.
A table by default (the SQL on one line, shortened); --json prints each
event whole as one JSON object a line.

TIME is an RFC 3339 time (2025-03-04T05:06:07Z), a date (2025-03-04), or how
long ago (90m, 36h, 7d). serve keeps events DATACHAT_AUDIT_DAYS days
(default 365; 0 forever).
`

func auditFlags(fs *flag.FlagSet, f *cmdFlags) {
	fs.StringVar(&f.since, "since", "", "events at or after `TIME`")
	fs.StringVar(&f.until, "until", "", "events before `TIME`")
	fs.StringVar(&f.user, "user", "", "events of the user `NAME` (who acted)")
	fs.StringVar(&f.source, "source", "", "events on the database source `NAME`")
	fs.StringVar(&f.kind, "kind", "", "events of one `KIND`: "+strings.Join(datachat.AuditKinds, ", "))
	fs.StringVar(&f.outcome, "outcome", "", "events that ended one way, `OUTCOME`: ok, refused or failed")
	fs.IntVar(&f.limit, "limit", 100, "print at most `N` events, the newest; 0 for all")
	fs.BoolVar(&f.json, "json", false, "print each event as a JSON object, one a line")
}

// checkAuditFlags checks audit's command line before anything is opened.
func checkAuditFlags(f *cmdFlags, args []string) error {
	now := time.Now()
	switch {
	case len(args) > 0:
		return fmt.Errorf("audit takes no arguments, got %q: filter with --user, --source, --kind…", args)
	case f.kind != "" && !slices.Contains(datachat.AuditKinds, f.kind):
		return fmt.Errorf("audit: --kind %q: want one of %s", f.kind, strings.Join(datachat.AuditKinds, ", "))
	case f.outcome != "" && f.outcome != datachat.AuditOK && f.outcome != datachat.AuditRefused && f.outcome != datachat.AuditFailed:
		return fmt.Errorf("audit: --outcome %q: want ok, refused or failed", f.outcome)
	case f.limit < 0:
		return fmt.Errorf("audit: --limit %d: want a number of events, or 0 for all", f.limit)
	}
	for _, b := range []struct{ name, val string }{{"since", f.since}, {"until", f.until}} {
		if b.val == "" {
			continue
		}
		if _, err := datachat.ParseAuditTime(b.val, now); err != nil {
			return fmt.Errorf("audit: --%s %s", b.name, datachat.ErrorMessage(err))
		}
	}
	return nil
}

func (m *Main) runAudit(ctx context.Context) error {
	st, err := m.openStore(ctx)
	if err != nil {
		return err
	}
	f := m.flags
	filter := datachat.AuditFilter{User: f.user, Source: f.source, Kind: f.kind, Outcome: f.outcome}
	now := time.Now()
	if f.since != "" {
		filter.Since, _ = datachat.ParseAuditTime(f.since, now) // checked by checkAuditFlags
	}
	if f.until != "" {
		filter.Until, _ = datachat.ParseAuditTime(f.until, now)
	}
	var tw *tabwriter.Writer
	if !f.json {
		tw = tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TIME\tUSER\tADDRESS\tKIND\tOUTCOME\tTARGET\tWHAT")
	}
	enc := json.NewEncoder(m.Stdout)
	left := f.limit
	for {
		filter.Limit = datachat.AuditPageMax
		if f.limit > 0 {
			filter.Limit = min(left, datachat.AuditPageMax)
		}
		page, err := st.AuditEvents(ctx, filter)
		if err != nil {
			return fmt.Errorf("audit: %s", datachat.ErrorMessage(err))
		}
		for _, e := range page.Events {
			if f.json {
				if err := enc.Encode(e); err != nil {
					return err
				}
				continue
			}
			fmt.Fprintln(tw, auditRow(e))
		}
		left -= len(page.Events)
		if page.Next == "" || f.limit > 0 && left <= 0 {
			break
		}
		filter.Cursor = page.Next
	}
	if tw != nil {
		return tw.Flush()
	}
	return nil
}

// auditRow is an event as a row of audit's table: each cell on one line,
// with nothing that could drive the terminal (datachat.AuditLine).
func auditRow(e *datachat.AuditEvent) string {
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return datachat.AuditLine(s, 40)
	}
	target := e.Target
	if e.Kind == datachat.AuditSourceQuery {
		target = e.Source
	}
	what := e.Detail
	if e.Kind == datachat.AuditSourceQuery {
		what = datachat.AuditLine(e.SQL, 80)
		if e.SQLTruncated {
			what += " [SQL cut at 64 KiB]"
		}
		switch {
		case e.RowCount != nil && *e.RowCount == 1:
			what += fmt.Sprintf(" → 1 row, %.0f ms", e.DurationMS)
		case e.RowCount != nil:
			what += fmt.Sprintf(" → %d rows, %.0f ms", *e.RowCount, e.DurationMS)
		default:
			what += fmt.Sprintf(" → %s (%.0f ms)", datachat.AuditLine(e.Error, 120), e.DurationMS)
		}
	} else if e.Error != "" {
		what += " (" + e.Error + ")"
	}
	return strings.Join([]string{e.Time.UTC().Format(time.RFC3339), dash(e.UserName), dash(e.Address),
		e.Kind, e.Outcome, dash(target), datachat.AuditLine(what, 0)}, "\t")
}

// record appends e, the record of a change the command made, to the audit
// log, its Detail followed by who ran the command. When it cannot be
// written, a change that gives access (a key, a source, a wider grant) is
// undone by undo and the command fails; one that takes access away (undo
// nil) stands, and the command fails saying its record is missing.
func (m *Main) record(ctx context.Context, e *datachat.AuditEvent, undo func(context.Context) error) error {
	e.Detail = strings.TrimSpace(e.Detail + "; " + m.actor())
	err := m.Store.AppendAudit(ctx, e)
	if err == nil {
		return nil
	}
	what := e.Kind + " " + e.Target
	if undo == nil {
		return fmt.Errorf("%s was done, but the audit log could not record it: %w", what, err)
	}
	if uerr := undo(context.WithoutCancel(ctx)); uerr != nil {
		return fmt.Errorf("the audit log could not record %s (%w), and undoing it failed: %v", what, err, uerr)
	}
	return fmt.Errorf("%s was undone: the audit log, which records every such change, could not record it: %w", what, err)
}

// actor says who made a change outside any request: serve as it starts,
// or a command with the operating system's user that ran it and where.
func (m *Main) actor() string {
	if m.Command == "serve" {
		return "by serve as it started"
	}
	name := "unknown user"
	if u, err := user.Current(); err == nil {
		name = "OS user " + u.Username
	}
	host, _ := os.Hostname()
	return fmt.Sprintf("by `datachat %s %s`, %s on %s", m.Command, m.flags.sub, name, host)
}

// pruneAudit deletes the audit events older than DATACHAT_AUDIT_DAYS days;
// 0 keeps them forever.
func (m *Main) pruneAudit(ctx context.Context, st datachat.Store) error {
	days := m.Config.AuditDays
	if days <= 0 {
		return nil
	}
	n, err := st.PruneAudit(ctx, time.Now().AddDate(0, 0, -days))
	if err != nil {
		return fmt.Errorf("prune the audit log (DATACHAT_AUDIT_DAYS=%d): %w", days, err)
	}
	if n > 0 {
		m.Logger.Info("audit events older than DATACHAT_AUDIT_DAYS deleted", slog.Int64("count", n), slog.Int("days", days))
	}
	return nil
}

// sweepAudit prunes the audit log once a day while serve runs, and returns
// the function that stops it.
func (m *Main) sweepAudit(st datachat.Store) func() error {
	return every(24*time.Hour, func(ctx context.Context) {
		if err := m.pruneAudit(ctx, st); err != nil && !errors.Is(err, context.Canceled) {
			m.Logger.Warn("audit log", slog.String("error", err.Error()))
		}
	})
}
