package extract

import (
	"regexp"
	"strings"
)

// parseMarkdown splits Markdown into headings (ATX "# x" and setext
// underlines), paragraphs, tables and code blocks. HTML comments, inline HTML
// tags, link targets and mdBook "{{#include …}}" directives are dropped; code
// blocks are kept as text; YAML front matter gives the title.
func parseMarkdown(text string) *Document {
	doc := &Document{}
	lines := strings.Split(text, "\n")
	start := 0
	if len(lines) > 0 && strings.TrimSpace(lines[0]) == "---" {
		for i := 1; i < len(lines) && i < 200; i++ {
			l := strings.TrimSpace(lines[i])
			if l == "---" || l == "..." {
				for _, fm := range lines[1:i] {
					if k, v, ok := strings.Cut(fm, ":"); ok && strings.TrimSpace(k) == "title" {
						doc.Title = strings.Trim(strings.TrimSpace(v), `"'`)
					}
				}
				start = i + 1
				break
			}
		}
	}

	var (
		para      []string
		paraTable bool
		fence     string // the open fence ("```", "~~~~"), "" outside code
		code      []string
		inComment bool
	)
	flush := func() {
		if t := strings.TrimSpace(strings.Join(para, "\n")); t != "" {
			kind := Paragraph
			if paraTable {
				kind = Table
			}
			doc.Blocks = append(doc.Blocks, Block{Kind: kind, Text: t})
		}
		para, paraTable = para[:0], false
	}
	for _, line := range lines[start:] {
		if fence != "" {
			if t := strings.TrimSpace(line); strings.HasPrefix(t, fence) && strings.Trim(t, fence[:1]) == "" {
				if c := strings.TrimRight(strings.Join(code, "\n"), " \t\n"); strings.TrimSpace(c) != "" {
					doc.Blocks = append(doc.Blocks, Block{Kind: Code, Text: strings.Trim(c, "\n")})
				}
				fence, code = "", code[:0]
				continue
			}
			if isDirective(line) {
				continue
			}
			code = append(code, strings.TrimRight(line, " \t"))
			continue
		}
		line, inComment = stripComments(line, inComment)
		line = stripQuote(line)
		if inComment && strings.TrimSpace(line) == "" {
			continue
		}
		trimmed := strings.TrimSpace(line)
		indent := len(line) - len(strings.TrimLeft(line, " "))
		if indent <= 3 {
			if f := fenceOpen(trimmed); f != "" {
				flush()
				fence = f
				continue
			}
		}
		if trimmed == "" {
			flush()
			continue
		}
		if isDirective(line) || linkRefDef.MatchString(line) {
			continue
		}
		if indent <= 3 {
			if m := atxHeading.FindStringSubmatch(line); m != nil {
				flush()
				h := strings.TrimSpace(closingHashes.ReplaceAllString(m[2], ""))
				if h = cleanInline(h); h != "" {
					doc.Blocks = append(doc.Blocks, Block{Kind: Heading, Level: len(m[1]), Text: oneLine(h)})
				}
				continue
			}
			if len(para) > 0 && !paraTable && (setextH1.MatchString(line) || setextH2.MatchString(line)) {
				level := 1
				if strings.Contains(trimmed, "-") {
					level = 2
				}
				h := oneLine(strings.Join(para, " "))
				para = para[:0]
				if h != "" {
					doc.Blocks = append(doc.Blocks, Block{Kind: Heading, Level: level, Text: h})
				}
				continue
			}
			if thematicBreak.MatchString(line) {
				flush()
				continue
			}
			if tableSep.MatchString(line) && strings.Contains(line, "|") || tableSep.MatchString(line) && len(para) > 0 && strings.Contains(para[len(para)-1], "|") {
				paraTable = true
				continue
			}
		}
		para = append(para, strings.TrimSpace(cleanInline(line)))
	}
	if fence != "" {
		if c := strings.TrimSpace(strings.Join(code, "\n")); c != "" {
			doc.Blocks = append(doc.Blocks, Block{Kind: Code, Text: c})
		}
	}
	flush()
	// drop blocks that cleaning emptied
	out := doc.Blocks[:0]
	for _, b := range doc.Blocks {
		if strings.TrimSpace(b.Text) != "" {
			out = append(out, b)
		}
	}
	doc.Blocks = out
	if doc.Title == "" {
		for _, b := range doc.Blocks {
			if b.Kind == Heading && b.Level == 1 {
				doc.Title = b.Text
				break
			}
		}
	}
	return doc
}

var (
	atxHeading    = regexp.MustCompile(`^ {0,3}(#{1,6})(?:[ \t]+(.*))?$`)
	closingHashes = regexp.MustCompile(`(?:^|[ \t]+)#+[ \t]*$`)
	setextH1      = regexp.MustCompile(`^ {0,3}=+[ \t]*$`)
	setextH2      = regexp.MustCompile(`^ {0,3}-+[ \t]*$`)
	thematicBreak = regexp.MustCompile(`^ {0,3}(?:(?:\*[ \t]*){3,}|(?:-[ \t]*){3,}|(?:_[ \t]*){3,})$`)
	tableSep      = regexp.MustCompile(`^[ \t]*\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$`)
	linkRefDef    = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:[ \t]*\S+`)
	directive     = regexp.MustCompile(`^[ \t]*\{\{#[^}]*\}\}[ \t]*$`)

	mdImage   = regexp.MustCompile(`!\[([^\]]*)\]\([^)]*\)`)
	mdLink    = regexp.MustCompile(`\[([^\]]+)\]\((?:[^()\s]|\([^()]*\))*(?:[ \t]+"[^"]*")?\)`)
	mdRefLink = regexp.MustCompile(`\[([^\]]+)\]\[[^\]]*\]`)
	htmlTag   = regexp.MustCompile(`</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>`)
)

// stripQuote removes block quote markers ("> > text" becomes "text").
func stripQuote(line string) string {
	for {
		t := strings.TrimLeft(line, " ")
		if len(line)-len(t) > 3 || !strings.HasPrefix(t, ">") {
			return line
		}
		line = strings.TrimPrefix(t[1:], " ")
	}
}

func isDirective(line string) bool {
	return strings.Contains(line, "{{#") && directive.MatchString(line)
}

func fenceOpen(t string) string {
	for _, c := range []string{"`", "~"} {
		if strings.HasPrefix(t, c+c+c) {
			n := len(t) - len(strings.TrimLeft(t, c))
			if c == "`" && strings.Contains(t[n:], "`") {
				return "" // an inline code span, not a fence
			}
			return strings.Repeat(c, n)
		}
	}
	return ""
}

// stripComments removes HTML comments from line; inComment says whether the
// line starts inside one, and the result whether the next line does.
func stripComments(line string, inComment bool) (string, bool) {
	var sb strings.Builder
	for {
		if inComment {
			end := strings.Index(line, "-->")
			if end < 0 {
				return sb.String(), true
			}
			line = line[end+3:]
			inComment = false
			continue
		}
		start := strings.Index(line, "<!--")
		if start < 0 {
			sb.WriteString(line)
			return sb.String(), false
		}
		sb.WriteString(line[:start])
		line = line[start+4:]
		inComment = true
	}
}

// cleanInline drops link targets, images' sources and inline HTML tags outside
// code spans.
func cleanInline(s string) string {
	if !strings.ContainsAny(s, "[<") {
		return s
	}
	parts := strings.Split(s, "`")
	for i := 0; i < len(parts); i += 2 {
		p := parts[i]
		if strings.Contains(p, "[") {
			p = mdImage.ReplaceAllString(p, "$1")
			p = mdLink.ReplaceAllString(p, "$1")
			p = mdRefLink.ReplaceAllString(p, "$1")
		}
		if strings.Contains(p, "<") {
			p = htmlTag.ReplaceAllString(p, "")
		}
		parts[i] = p
	}
	return strings.Join(parts, "`")
}
