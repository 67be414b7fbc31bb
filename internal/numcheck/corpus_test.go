package numcheck

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The labelled corpus lives in testdata/corpus-*.txt, written for this test.
// Each case is a block of directives:
//
//	@case NAME
//	@question TEXT
//	@result ID [rows=N]         then a header line of column names and one line
//	                            per row, cells separated by "|": NULL, true, false,
//	                            an integer (int64), a decimal or float
//	                            (json.Number), "quoted text" (a string, also for
//	                            DECIMALs and big integers), [..] or {..} (JSON),
//	                            or bare text
//	@excerpt ID                 then its text
//	@answer                     then the answer, every number-like token marked
//	                            {{TEXT|LABEL}}
//
// Labels: x (not a checkable number; x:why for the reader), u (unmatched:
// invented, miscomputed, misrounded, wrong unit or sign), m (matched, any
// source), or m:SRC/SRC… with SRC one of ID@ROW,COL (a cell, 0-based), ID@n
// (the row count), q (the question), s:ID (an excerpt).

type corpusCase struct {
	name     string
	file     string
	ev       Evidence
	answer   string
	labels   []label
	lineNo   int
	rawLines []string
}

type label struct {
	text       string
	start, end int // runes in the plain answer
	class      string
	sources    []Source // alternatives; nil with class m means any
}

var markRE = regexp.MustCompile(`\{\{(.*?)\|([^|{}]*)\}\}`)

func loadCorpus(t testing.TB) []corpusCase {
	t.Helper()
	files, err := filepath.Glob("testdata/corpus-*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus files: %v", err)
	}
	var cases []corpusCase
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		cs, err := parseCorpus(filepath.Base(f), b)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		cases = append(cases, cs...)
	}
	return cases
}

func parseCorpus(file string, b []byte) ([]corpusCase, error) {
	var cases []corpusCase
	var cur *corpusCase
	var section string // "result", "excerpt", "answer"
	var body []string
	var resHeader bool
	flush := func() error {
		if cur == nil {
			return nil
		}
		switch section {
		case "excerpt":
			ex := &cur.ev.Excerpts[len(cur.ev.Excerpts)-1]
			ex.Text = strings.TrimRight(strings.Join(body, "\n"), "\n")
		case "answer":
			cur.rawLines = body
			if err := cur.setAnswer(strings.TrimRight(strings.Join(body, "\n"), "\n")); err != nil {
				return fmt.Errorf("case %s: %w", cur.name, err)
			}
		}
		section, body = "", nil
		return nil
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		ln := sc.Text()
		if strings.HasPrefix(ln, "@") {
			if err := flush(); err != nil {
				return nil, err
			}
			dir, arg, _ := strings.Cut(ln[1:], " ")
			switch dir {
			case "case":
				cases = append(cases, corpusCase{name: arg, file: file, lineNo: n})
				cur = &cases[len(cases)-1]
			case "question":
				cur.ev.Question = arg
			case "result":
				fs := strings.Fields(arg)
				r := Result{ToolCallID: fs[0], RowCount: -1}
				for _, f := range fs[1:] {
					if v, ok := strings.CutPrefix(f, "rows="); ok {
						r.RowCount, _ = strconv.Atoi(v)
					}
				}
				cur.ev.Results = append(cur.ev.Results, r)
				section, resHeader = "result", true
			case "excerpt":
				cur.ev.Excerpts = append(cur.ev.Excerpts, Excerpt{SourceID: arg})
				section = "excerpt"
			case "answer":
				section = "answer"
			default:
				return nil, fmt.Errorf("line %d: unknown directive %q", n, dir)
			}
			continue
		}
		switch section {
		case "result":
			if strings.TrimSpace(ln) == "" {
				continue
			}
			r := &cur.ev.Results[len(cur.ev.Results)-1]
			cells := strings.Split(ln, "|")
			if resHeader {
				for _, c := range cells {
					r.Columns = append(r.Columns, strings.TrimSpace(c))
				}
				resHeader = false
				continue
			}
			row := make([]any, len(cells))
			for i, c := range cells {
				v, err := parseCell(strings.TrimSpace(c))
				if err != nil {
					return nil, fmt.Errorf("line %d: %w", n, err)
				}
				row[i] = v
			}
			r.Rows = append(r.Rows, row)
		case "excerpt", "answer":
			body = append(body, ln)
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	for i := range cases {
		for j := range cases[i].ev.Results {
			if r := &cases[i].ev.Results[j]; r.RowCount < 0 {
				r.RowCount = len(r.Rows)
			}
		}
	}
	return cases, sc.Err()
}

var intRE = regexp.MustCompile(`^-?\d+$`)
var floatRE = regexp.MustCompile(`^-?\d+(\.\d+)?([eE][-+]?\d+)?$`)

func parseCell(s string) (any, error) {
	switch {
	case s == "NULL":
		return nil, nil
	case s == "true" || s == "false":
		return s == "true", nil
	case intRE.MatchString(s):
		return strconv.ParseInt(s, 10, 64)
	case floatRE.MatchString(s):
		return json.Number(s), nil
	case strings.HasPrefix(s, `"`):
		var v string
		err := json.Unmarshal([]byte(s), &v)
		return v, err
	case strings.HasPrefix(s, "[") || strings.HasPrefix(s, "{"):
		d := json.NewDecoder(strings.NewReader(s))
		d.UseNumber()
		var v any
		err := d.Decode(&v)
		return v, err
	}
	return s, nil
}

// setAnswer strips the marks from the annotated answer and records labels at
// rune offsets of the plain text.
func (c *corpusCase) setAnswer(annotated string) error {
	var b strings.Builder
	runes := 0
	last := 0
	for _, m := range markRE.FindAllStringSubmatchIndex(annotated, -1) {
		pre := annotated[last:m[0]]
		b.WriteString(pre)
		runes += len([]rune(pre))
		text := annotated[m[2]:m[3]]
		lab := label{text: text, start: runes, end: runes + len([]rune(text))}
		spec := annotated[m[4]:m[5]]
		cls, srcs, _ := strings.Cut(spec, ":")
		lab.class = cls
		switch cls {
		case "x", "u":
		case "m":
			if srcs != "" {
				for _, s := range strings.Split(srcs, "/") {
					src, err := parseSrc(s)
					if err != nil {
						return fmt.Errorf("label %q: %w", spec, err)
					}
					lab.sources = append(lab.sources, src)
				}
			}
		default:
			return fmt.Errorf("label %q of %q: unknown class", spec, text)
		}
		b.WriteString(text)
		runes = lab.end
		c.labels = append(c.labels, lab)
		last = m[1]
	}
	b.WriteString(annotated[last:])
	c.answer = b.String()
	if strings.Contains(c.answer, "{{") {
		return fmt.Errorf("unparsed mark in %q", c.answer)
	}
	return nil
}

func parseSrc(s string) (Source, error) {
	switch {
	case s == "q":
		return Source{Question: true}, nil
	case strings.HasPrefix(s, "s:"):
		return Source{SourceID: s[2:]}, nil
	}
	id, pos, ok := strings.Cut(s, "@")
	if !ok {
		return Source{}, fmt.Errorf("bad source %q", s)
	}
	if pos == "n" {
		return Source{ToolCallID: id}, nil
	}
	rs, cs, ok := strings.Cut(pos, ",")
	if !ok {
		return Source{}, fmt.Errorf("bad source %q", s)
	}
	r, err1 := strconv.Atoi(rs)
	c, err2 := strconv.Atoi(cs)
	if err1 != nil || err2 != nil {
		return Source{}, fmt.Errorf("bad source %q", s)
	}
	return Source{ToolCallID: id, Row: &r, Column: &c}, nil
}

func sameSource(a, b Source) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// classOf maps a check's status to a corpus class.
func classOf(status string) string {
	if status == Matched {
		return "m"
	}
	return "u"
}

type corpusScore struct {
	confusion                  map[[2]string]int // [true, predicted]
	attrRight, attrAll         int
	answers, tokens, checksRun int
	problems                   []string
}

func scoreCorpus(cases []corpusCase) corpusScore {
	s := corpusScore{confusion: map[[2]string]int{}}
	for _, c := range cases {
		s.answers++
		checks := CheckAnswer(c.answer, c.ev)
		s.checksRun += len(checks)
		used := make([]bool, len(checks))
		for _, l := range c.labels {
			s.tokens++
			pred := "x"
			var got *Check
			for i := range checks {
				ch := &checks[i]
				if ch.Start < l.end && l.start < ch.End {
					used[i] = true
					if ch.Start == l.start && ch.End == l.end {
						pred, got = classOf(ch.Status), ch
					} else {
						// A check that spans the label wrongly: the label is
						// missed and the check is spurious.
						s.confusion[[2]string{"x", classOf(ch.Status)}]++
						s.problems = append(s.problems, fmt.Sprintf("%s: span %q, want %q", c.name, ch.Text, l.text))
					}
				}
			}
			if l.class == "x" && got == nil {
				// An overlapping check was counted above as spurious.
				s.confusion[[2]string{"x", "x"}]++
				continue
			}
			s.confusion[[2]string{l.class, pred}]++
			if pred != l.class {
				src := ""
				if got != nil {
					j, _ := json.Marshal(got.Source)
					src = string(j)
				}
				s.problems = append(s.problems, fmt.Sprintf("%s: %q labelled %s, got %s %s", c.name, l.text, l.class, pred, src))
			}
			if l.class == "m" && pred == "m" && l.sources != nil {
				s.attrAll++
				if slices.ContainsFunc(l.sources, func(src Source) bool { return sameSource(src, got.Source) }) {
					s.attrRight++
				} else {
					j, _ := json.Marshal(got.Source)
					s.problems = append(s.problems, fmt.Sprintf("%s: %q attributed to %s", c.name, l.text, j))
				}
			}
		}
		for i, ch := range checks {
			if !used[i] {
				s.confusion[[2]string{"x", classOf(ch.Status)}]++
				s.problems = append(s.problems, fmt.Sprintf("%s: unlabelled check %q (%s)", c.name, ch.Text, ch.Status))
			}
		}
	}
	return s
}

func (s corpusScore) precisionRecall(class string) (p, r float64) {
	tp := s.confusion[[2]string{class, class}]
	var predPos, truePos int
	for k, n := range s.confusion {
		if k[1] == class {
			predPos += n
		}
		if k[0] == class {
			truePos += n
		}
	}
	return ratio(tp, predPos), ratio(tp, truePos)
}

// checkable is the detection of checkable numbers: m or u against x.
func (s corpusScore) checkable() (p, r float64) {
	var tp, predPos, truePos int
	for k, n := range s.confusion {
		if k[1] != "x" {
			predPos += n
		}
		if k[0] != "x" {
			truePos += n
		}
		if k[0] != "x" && k[1] != "x" {
			tp += n
		}
	}
	return ratio(tp, predPos), ratio(tp, truePos)
}

func (s corpusScore) accuracy() float64 {
	var right, all int
	for k, n := range s.confusion {
		all += n
		if k[0] == k[1] {
			right += n
		}
	}
	return ratio(right, all)
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 1
	}
	return float64(a) / float64(b)
}

func (s corpusScore) count(class string) int {
	n := 0
	for k, v := range s.confusion {
		if k[0] == class {
			n += v
		}
	}
	return n
}

// TestCorpus measures the checker on the labelled corpus. Positive class for
// "unmatched detection": a number whose true label is u (it should be
// flagged); precision = flagged numbers that are truly unmatched, recall =
// truly unmatched numbers that were flagged. Likewise for "matched", and for
// "checkable" (m or u against x: the tokenizer's choice of what to check).
// Accuracy is over all three classes. Attribution accuracy is, among truly
// matched numbers the checker matched and whose label names sources, the
// share attributed to one of them.
func TestCorpus(t *testing.T) {
	cases := loadCorpus(t)
	if len(cases) < 60 {
		t.Errorf("corpus has %d answers, want at least 60", len(cases))
	}
	s := scoreCorpus(cases)
	for _, p := range s.problems {
		t.Log(p)
	}
	// The held-out file was written after the rules were settled on the
	// others, and scored once before any change; it is reported apart.
	held := map[string][]corpusCase{}
	for _, c := range cases {
		if strings.Contains(c.file, "heldout") {
			held[c.file] = append(held[c.file], c)
		}
	}
	for _, f := range slices.Sorted(maps.Keys(held)) {
		h := scoreCorpus(held[f])
		up, ur := h.precisionRecall("u")
		mp, mr := h.precisionRecall("m")
		t.Logf("%s only: %d answers, %d tokens; unmatched P %.3f R %.3f; matched P %.3f R %.3f; accuracy %.3f; attribution %.3f",
			f, h.answers, h.tokens, up, ur, mp, mr, h.accuracy(), ratio(h.attrRight, h.attrAll))
	}
	up, ur := s.precisionRecall("u")
	mp, mr := s.precisionRecall("m")
	cp, cr := s.checkable()
	acc := s.accuracy()
	attr := ratio(s.attrRight, s.attrAll)
	t.Logf("corpus: %d answers, %d labelled tokens (%d m, %d u, %d x), %d checks",
		s.answers, s.tokens, s.count("m"), s.count("u"), s.count("x"), s.checksRun)
	t.Logf("\n| measure | precision | recall |\n|---|---:|---:|\n"+
		"| unmatched detection (positive = u) | %.3f | %.3f |\n"+
		"| matched (positive = m) | %.3f | %.3f |\n"+
		"| checkable numbers (m or u vs x) | %.3f | %.3f |\n"+
		"| 3-class accuracy | %.3f | |\n"+
		"| source attribution (%d labelled matches) | %.3f | |",
		up, ur, mp, mr, cp, cr, acc, s.attrAll, attr)
	t.Logf("confusion [true→predicted]: %v", s.confusion)
	for _, m := range []struct {
		name string
		v    float64
	}{
		{"unmatched precision", up}, {"unmatched recall", ur},
		{"matched precision", mp}, {"matched recall", mr},
		{"accuracy", acc},
	} {
		if m.v < 0.95 {
			t.Errorf("%s = %.3f, want ≥ 0.95", m.name, m.v)
		}
	}
	if attr < 0.9 {
		t.Errorf("attribution accuracy = %.3f, want ≥ 0.90", attr)
	}
}

// TestCorpusWellFormed checks the corpus itself: labels name real results and
// cells, and every case has labels.
func TestCorpusWellFormed(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range loadCorpus(t) {
		if seen[c.name] {
			t.Errorf("case %s: duplicate name", c.name)
		}
		seen[c.name] = true
		if len(c.labels) == 0 {
			t.Errorf("case %s: no labels", c.name)
		}
		for _, l := range c.labels {
			for _, s := range l.sources {
				switch {
				case s.SourceID != "":
					if !slices.ContainsFunc(c.ev.Excerpts, func(e Excerpt) bool { return e.SourceID == s.SourceID }) {
						t.Errorf("case %s: %q names excerpt %s, not in the case", c.name, l.text, s.SourceID)
					}
				case s.ToolCallID != "":
					i := slices.IndexFunc(c.ev.Results, func(r Result) bool { return r.ToolCallID == s.ToolCallID })
					if i < 0 {
						t.Errorf("case %s: %q names result %s, not in the case", c.name, l.text, s.ToolCallID)
						continue
					}
					r := c.ev.Results[i]
					if s.Row != nil && (*s.Row >= len(r.Rows) || *s.Column >= len(r.Rows[*s.Row])) {
						t.Errorf("case %s: %q names cell %d,%d outside result %s", c.name, l.text, *s.Row, *s.Column, s.ToolCallID)
					}
				}
			}
		}
		for _, r := range c.ev.Results {
			for i, row := range r.Rows {
				if len(row) != len(r.Columns) {
					t.Errorf("case %s: result %s row %d has %d cells for %d columns", c.name, r.ToolCallID, i, len(row), len(r.Columns))
				}
			}
		}
	}
}
