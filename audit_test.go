package datachat

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"
)

func TestAuditLine(t *testing.T) {
	for _, tc := range []struct {
		in   string
		max  int
		want string
	}{
		{"SELECT 1", 0, "SELECT 1"},
		{"  SELECT\n\t1\r\n  FROM  t  ", 0, "SELECT 1 FROM t"},
		{"a\x1b[2Jb", 0, `a\u001b[2Jb`},
		{"\x1b]0;title\x07", 0, `\u001b]0;title\u0007`},
		{"a\u009b31mb\x7f", 0, `a\u009b31mb\u007f`},
		{"a\u202eb\u2066c\u200fd", 0, `a\u202eb\u2066c\u200fd`},
		{"line\u2028sep\u00a0\u3000x\u0085y", 0, "line sep x y"},
		{"a\x00b", 0, `a\u0000b`},
		{"é漢字🦆", 0, "é漢字🦆"},
		{"abcdefghij", 5, "abcd…"},
		{"漢字漢字漢字", 3, "漢字…"},
		{"abc", 3, "abc"},
		{"", 5, ""},
	} {
		if got := AuditLine(tc.in, tc.max); got != tc.want {
			t.Errorf("AuditLine(%q, %d): got %q, want %q", tc.in, tc.max, got, tc.want)
		}
	}
}

// FuzzAuditLine: whatever the text, the line has no character that could
// drive a terminal, is valid UTF-8, and is at most max characters.
func FuzzAuditLine(f *testing.F) {
	for _, s := range []string{"SELECT 1", "\x1b[2J\r\n", "\xff\xfe", "\u202e\u009b", strings.Repeat("🦆", 50)} {
		f.Add(s, 10)
	}
	f.Fuzz(func(t *testing.T, s string, max int) {
		max = max % 200
		if max < 0 {
			max = -max
		}
		got := AuditLine(s, max)
		for _, r := range got {
			if unsafeInLine(r) || unicode.IsSpace(r) && r != ' ' {
				t.Fatalf("AuditLine(%q): %q holds %U", s, got, r)
			}
		}
		if !utf8.ValidString(got) && utf8.ValidString(s) {
			t.Fatalf("AuditLine(%q): %q is not valid UTF-8", s, got)
		}
		if max > 0 && utf8.RuneCountInString(got) > max {
			t.Fatalf("AuditLine(%q, %d): %d characters", s, max, utf8.RuneCountInString(got))
		}
	})
}

func TestParseAuditTime(t *testing.T) {
	now := time.Date(2025, 3, 10, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Time
	}{
		{"2025-03-04T05:06:07Z", time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)},
		{"2025-03-04T05:06:07.5+02:00", time.Date(2025, 3, 4, 3, 6, 7, 5e8, time.UTC)},
		{"2025-03-04", time.Date(2025, 3, 4, 0, 0, 0, 0, time.UTC)},
		{" 36h ", now.Add(-36 * time.Hour)},
		{"90m", now.Add(-90 * time.Minute)},
		{"7d", now.AddDate(0, 0, -7)},
		{"0d", now},
	} {
		got, err := ParseAuditTime(tc.in, now)
		if err != nil || !got.Equal(tc.want) {
			t.Errorf("ParseAuditTime(%q): got %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "yesterday", "-5h", "-1d", "1.5d", "d", "99999999d", "2025-13-01", "2025-03-04 05:06", "1y", "7 d"} {
		if _, err := ParseAuditTime(in, now); ErrorCode(err) != EINVALID || !strings.Contains(ErrorMessage(err), "is not a time") {
			t.Errorf("ParseAuditTime(%q): got %v, want EINVALID saying it is not a time", in, err)
		}
	}
}

func TestAuditEventClean(t *testing.T) {
	e := &AuditEvent{SQL: "SELECT '\xff'\x00" + strings.Repeat("é", AuditSQLMax), Target: strings.Repeat("x", AuditTextMax+1), Detail: "\x1b[2J"}
	e.Clean()
	if !utf8.ValidString(e.SQL) || strings.ContainsRune(e.SQL, 0) || !strings.HasPrefix(e.SQL, "SELECT '\uFFFD'\uFFFD") || len(e.SQL) > AuditSQLMax || !e.SQLTruncated {
		t.Errorf("SQL: %d bytes, truncated %v, starts %q", len(e.SQL), e.SQLTruncated, e.SQL[:20])
	}
	if len(e.Target) != AuditTextMax || e.Detail != "\x1b[2J" {
		t.Errorf("target %d bytes, detail %q: want %d and the control characters kept", len(e.Target), e.Detail, AuditTextMax)
	}
	// Already truncated stays so.
	e = &AuditEvent{SQL: "SELECT 1", SQLTruncated: true}
	e.Clean()
	if !e.SQLTruncated {
		t.Error("Clean cleared SQLTruncated")
	}
}

func TestAuditOrigin(t *testing.T) {
	if a, r := AuditOrigin(context.Background()); a != "" || r != "" {
		t.Errorf("without an origin: %q %q", a, r)
	}
	ctx := WithAuditOrigin(context.Background(), "192.0.2.1", "req-1")
	if a, r := AuditOrigin(context.WithoutCancel(ctx)); a != "192.0.2.1" || r != "req-1" {
		t.Errorf("got %q %q", a, r)
	}
}
