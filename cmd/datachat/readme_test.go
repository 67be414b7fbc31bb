package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"

	"datachat/internal/config"
	"datachat/internal/sampledata"
)

// readmeSection returns the README's section under the heading "## title",
// up to the next such heading.
func readmeSection(t *testing.T, readme, title string) string {
	t.Helper()
	i := strings.Index(readme, "\n## "+title+"\n")
	if i < 0 {
		t.Fatalf("the README has no section %q", title)
	}
	sec := readme[i+len(title)+5:]
	if j := strings.Index(sec, "\n## "); j >= 0 {
		sec = sec[:j]
	}
	return sec
}

// commandLines returns the lines of a section's fenced code blocks, each
// without its indentation and trailing comment.
func commandLines(sec string) []string {
	var out []string
	in := false
	for _, l := range strings.Split(sec, "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "```") {
			in = !in
			continue
		}
		if !in || l == "" {
			continue
		}
		if i := strings.Index(l, " #"); i >= 0 {
			l = strings.TrimSpace(l[:i])
		}
		out = append(out, l)
	}
	return out
}

// TestREADMEQuickStart: what the README's quick start tells a new user to
// type exists and does what it says — each datachat command line parses, the
// variables it exports are ones datachat reads, serve's first start prints
// the setup URL and `users reset admin` a new one — and the facts it states
// about the sample data and its screenshot are true. The two commands of
// "Set up in detail" (run the server, run the tests) are there as written.
func TestREADMEQuickStart(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	quick := readmeSection(t, readme, "Quick start")

	// Every variable the quick start exports is one configuration reads.
	asked := map[string]bool{}
	if _, err := config.Load("", func(k string) (string, bool) {
		asked[k] = true
		if k == "DATACHAT_DATA_DIR" {
			return t.TempDir(), true
		}
		return "", false
	}); err != nil {
		t.Fatal(err)
	}
	var commands [][]string
	exported := 0
	for _, l := range commandLines(quick) {
		f := strings.Fields(l)
		switch f[0] {
		case "export":
			for _, kv := range f[1:] {
				name, _, _ := strings.Cut(kv, "=")
				exported++
				if !asked[name] {
					t.Errorf("the quick start exports %s, which datachat does not read", name)
				}
			}
		case "go":
			if l != "go install ./cmd/datachat" {
				t.Errorf("the quick start runs %q; want go install ./cmd/datachat", l)
			}
		case "datachat":
			commands = append(commands, f[1:])
		default:
			t.Errorf("the quick start's code shows %q: neither a datachat command, go install nor an export", l)
		}
	}
	if exported < 3 {
		t.Errorf("the quick start exports %d variables; want one line for each of Gemini, OpenAI-compatible and Ollama", exported)
	}
	for _, name := range []string{"GEMINI_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "OLLAMA_HOST"} {
		if !strings.Contains(quick, "export "+name) && !strings.Contains(quick, " "+name+"=") {
			t.Errorf("the quick start does not set %s", name)
		}
	}
	// datachat commands in the text too (`datachat users reset admin`).
	for _, m := range regexp.MustCompile("`datachat ([^`]+)`").FindAllStringSubmatch(quick, -1) {
		commands = append(commands, strings.Fields(m[1]))
	}
	if len(commands) < 2 {
		t.Fatalf("found %d datachat commands in the quick start, want serve and users reset admin at least", len(commands))
	}
	for _, args := range commands {
		m := &Main{Env: testEnv(t, nil), Stdout: io.Discard, Stderr: io.Discard}
		var ue *usageError
		if err := m.ParseFlags(context.Background(), args); errors.As(err, &ue) || errors.Is(err, flag.ErrHelp) {
			t.Errorf("the quick start's datachat %s is not a valid command line: %v", strings.Join(args, " "), err)
		}
	}

	// serve's first start prints the setup URL, and users reset admin a new one.
	if !strings.Contains(quick, "#invite=") || !strings.Contains(quick, "datachat users reset admin") {
		t.Errorf("the quick start does not show the setup URL and how to get a new one")
	}
	env := testEnv(t, nil)
	srv, out := openServe(t, env)
	invite := regexp.MustCompile(`https?://\S+/#invite=\S+`)
	if !invite.MatchString(out.String()) {
		t.Errorf("serve's first start printed no setup URL:\n%s", out.String())
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if stdout, stderr, err := runMain(t, env, "users", "reset", "admin"); err != nil || !invite.MatchString(stdout) {
		t.Errorf("datachat users reset admin: %v, stdout %q, stderr %q; want a new setup URL", err, stdout, stderr)
	}

	// What it says of the sample data and the screenshot.
	for _, want := range []string{
		fmt.Sprintf("`%s`", sampledata.Table),
		fmt.Sprintf("`%s`", sampledata.DocumentFile),
		fmt.Sprintf("%s rows", thousands(sampledata.Rows())),
	} {
		if !strings.Contains(quick, want) {
			t.Errorf("the quick start does not say %s", want)
		}
	}
	js, err := os.ReadFile("../../web/assets/js/sample.js")
	if err != nil {
		t.Fatal(err)
	}
	label := regexp.MustCompile(`\*\*(Try it[^*]+)\*\*`).FindStringSubmatch(quick)
	if label == nil || !bytes.Contains(js, []byte("'"+label[1]+"'")) {
		t.Errorf("the quick start's button %q is not the page's (web/assets/js/sample.js)", label)
	}
	shot := regexp.MustCompile(`!\[[^\]]*\]\(([^)]+)\)`).FindStringSubmatch(readme[:strings.Index(readme, "\n## Quick start")])
	if shot == nil {
		t.Fatal("the README shows no screenshot before its quick start")
	}
	fi, err := os.Stat("../../" + shot[1])
	switch {
	case err != nil:
		t.Errorf("the README's screenshot: %v", err)
	case fi.Size() >= 300<<10:
		t.Errorf("the README's screenshot %s is %d bytes; keep it under 300 KB", shot[1], fi.Size())
	}
	steps, err := os.ReadFile("../../web/e2e/steps-sample.mjs")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(steps, []byte("DATACHAT_E2E_README_SHOT")) || !strings.Contains(readme, "DATACHAT_E2E_README_SHOT=$PWD/"+shot[1]) {
		t.Errorf("the README does not say how the browser test makes %s (DATACHAT_E2E_README_SHOT)", shot[1])
	}

	// The two commands a reader copies: run the server, run the tests.
	detail := commandLines(readmeSection(t, readme, "Set up in detail"))
	for _, want := range []string{"go install ./cmd/datachat", "datachat serve", "go test ./..."} {
		found := false
		for _, l := range detail {
			found = found || l == want
		}
		if !found {
			t.Errorf("\"Set up in detail\" lacks the command %q (has %q)", want, detail)
		}
	}
}

// thousands writes n with comma thousands separators, as the README does.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
