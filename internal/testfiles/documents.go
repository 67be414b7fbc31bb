package testfiles

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"unicode/utf16"
)

// Facts of [GuidePDF].
const (
	GuideName  = "review-guide.pdf"
	GuidePages = 3
	// GuidePhrase opens page GuidePhrasePage.
	GuidePhrase     = "Clear names beat clever comments."
	GuidePhrasePage = 2
)

// GuidePDF returns a three-page guide to code review, a plain unencrypted
// PDF; [GuidePhrase] is on page 2.
func GuidePDF() []byte {
	return PDF{Flate: true, Pages: [][]byte{
		ProsePage(
			"A Short Guide to Code Review",
			"These notes collect the habits our team relies on when reading each other's changes. They are short on purpose: a reviewer should be able to keep all of them in mind while reading a diff.",
			"Review is a conversation between two people who want the same thing, code that works and that the next person can change safely. Comments are about the code, never about its author."),
		ProsePage(
			GuidePhrase+" A variable, function or type whose name says what it holds or does needs no comment to explain it, and a comment that explains a poor name drifts out of date the first time the code changes.",
			"Small changes are reviewed well; large ones are skimmed. When a change grows past a few hundred lines, ask whether it can be split into steps that each leave the program working.",
			"Tests are part of the change. A fix without a test that fails before it and passes after it will be undone by accident."),
		ProsePage(
			"Checklist",
			"Before approving, check that the change does what its description says, that errors are handled and reported with enough context, that new behaviour is covered by tests, and that the documentation users read has been updated.",
			"When in doubt, ask a question rather than request a change. The author often knows something the reviewer does not."),
	}}.Bytes()
}

// Guide writes [GuidePDF] to dir/review-guide.pdf and returns the path.
func Guide(tb testing.TB, dir string) string {
	tb.Helper()
	return Write(tb, dir, GuideName, GuidePDF())
}

// LockedName is the file name [Locked] writes.
const LockedName = "locked.pdf"

// LockedPDF returns a one-page PDF encrypted with the user password
// "secret": it cannot be opened without it.
func LockedPDF() []byte {
	return PDF{Encrypt: true, UserPassword: "secret", Flate: true, Pages: [][]byte{
		ProsePage("Salaries for the coming year, for the eyes of the board only."),
	}}.Bytes()
}

// Locked writes [LockedPDF] to dir/locked.pdf and returns the path.
func Locked(tb testing.TB, dir string) string {
	tb.Helper()
	return Write(tb, dir, LockedName, LockedPDF())
}

// Facts of [HistoryMarkdown].
const (
	HistoryName = "history.md"
	// HistoryQuestion is answered by the section on the company's founding.
	HistoryQuestion = "When was Harbour Instruments founded and renamed?"
)

// HistoryMarkdown returns the history of an invented company in Markdown:
// a title, four sections of paragraphs and a table.
func HistoryMarkdown() []byte {
	return []byte(`# Harbour Instruments

Harbour Instruments is an invented maker of navigation and measuring equipment, described here to give tests a company history to search. It designs compasses, depth sounders and tide gauges and sells them to shipyards and port authorities.

## Founding and early years (1908–1930)

The company was founded in 1908 as the Coastal Gauge and Compass Works by two instrument makers who had repaired ship compasses on the quay for a decade. In 1921, after merging with a small optical workshop, it was renamed Harbour Instruments, the name it has kept since.

During the 1920s the firm built its first echo sounder, which measured depth by timing the return of a pulse of sound from the sea floor. Fishing fleets bought it in large numbers, and by 1930 it employed some four hundred people.

## Radar and electronics (1931–1979)

The war years turned the company towards electronics. Its engineers worked on marine radar, and the first Harbour radar set for merchant ships went on sale in 1952.

In the 1960s the company opened a second plant inland and began to make instruments for weather stations. A long strike in 1974 ended with the first profit-sharing agreement in the industry.

## Satellites and software (1980 to today)

Satellite positioning reached small boats in the 1990s, and Harbour Instruments sold its first receivers in 1994. Today most of its revenue comes from software that combines charts, positions and tide predictions for port operators.

## Timeline

| Year | Event |
|------|-------|
| 1908 | Founded as the Coastal Gauge and Compass Works |
| 1921 | Renamed Harbour Instruments |
| 1952 | First radar set for merchant ships |
| 1994 | First satellite positioning receivers |
`)
}

// History writes [HistoryMarkdown] to dir/history.md and returns the path.
func History(tb testing.TB, dir string) string {
	tb.Helper()
	return Write(tb, dir, HistoryName, HistoryMarkdown())
}

// BlogHTML returns a blog post as a documentation site renders it: the
// article (a title, sections, a table, code) inside navigation, a sidebar,
// a footer and scripts.
func BlogHTML() []byte {
	return []byte(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Does Hydration Matter for a Sourdough Starter? | The Test Kitchen</title>
<script>window.__siteConfig = {"theme": "light", "search": true};</script>
<style>.navbar { position: sticky; }</style>
</head>
<body>
<div id="__site">
<nav class="navbar" aria-label="Main"><a href="/">The Test Kitchen</a><a href="/docs">Recipes</a><a href="/blog">Blog</a><button>Search</button></nav>
<div class="main-wrapper">
<aside class="sidebar"><h3>Recent posts</h3><ul><li><a href="/blog/baskets">Proofing baskets compared</a></li><li><a href="/blog/flour">Which flour for rye bread?</a></li></ul></aside>
<main>
<article>
<header><h1>Does Hydration Matter for a Sourdough Starter?</h1><p>May 3, 2024 · 6 min read</p></header>
<p>A starter is flour and water in which wild yeast and bacteria live. We fed six jars of the same starter at different hydrations for two weeks and measured how fast each one rose.</p>
<h2>Experiment Setup</h2>
<p>Each jar was fed once a day at room temperature, 22 °C, with the same whole wheat flour. Hydration is the weight of water as a percentage of the weight of flour.</p>
<table>
<thead><tr><th>Jar</th><th>Hydration</th><th>Hours to double</th></tr></thead>
<tbody><tr><td>A</td><td>60 %</td><td>7.5</td></tr><tr><td>B</td><td>100 %</td><td>5</td></tr><tr><td>C</td><td>140 %</td><td>6</td></tr></tbody>
</table>
<h2>Experiment Results</h2>
<p>The jar at 100 % hydration doubled fastest, in five hours; the stiffest starter took half as long again. We logged the heights with a small script:</p>
<pre><code>for jar in jars:
    print(jar.name, jar.height_mm)</code></pre>
<h2>Analysis and Discussion</h2>
<p>A wetter starter lets yeast move and feed more easily, up to a point: past 120 % the acid builds up faster than the yeast grows.</p>
</article>
</main>
</div>
<footer class="footer">Copyright © 2024 The Test Kitchen. Built with a static site generator.</footer>
<script src="/assets/js/main.3f2a.js"></script>
</div>
</body>
</html>
`)
}

// NotesText is the text [NotesUTF16] encodes.
const NotesText = "Meeting notes, 12 March\n\n" +
	"The café on Quay Street will host the next meeting.\n" +
	"Bring the tide tables – the printed ones, not the app.\n\n" +
	"Agenda: the budget, the new gauge, “any other business”.\n"

// NotesUTF16 returns [NotesText] in UTF-16 little-endian without a byte
// order mark, as some Windows tools save text.
func NotesUTF16() []byte {
	units := utf16.Encode([]rune(NotesText))
	b := make([]byte, 2*len(units))
	for i, u := range units {
		binary.LittleEndian.PutUint16(b[2*i:], u)
	}
	return b
}

// DOCX returns a Word document whose document.xml body is body (WordprocessingML,
// the content of <w:body>), with the extra parts given by name (such as
// "word/styles.xml"). It has no package relationships: readers fall back
// to word/document.xml.
func DOCX(body string, extra map[string]string) []byte {
	files := map[string]string{
		"[Content_Types].xml": `<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>`,
		"word/document.xml": `<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>` +
			body + `</w:body></w:document>`,
	}
	for k, v := range extra {
		files[k] = v
	}
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		w, err := zw.Create(name)
		if err != nil {
			panic(err)
		}
		io.WriteString(w, files[name])
	}
	if err := zw.Close(); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// TripName is the file name [Trip] writes.
const TripName = "field-trip.docx"

// TripDOCX returns a Word document with the parts a word processor writes:
// a title, headings of two levels, paragraphs, a bulleted list and a table,
// with styles, relationships and document properties.
func TripDOCX() []byte {
	p := func(style, text string) string {
		var ppr string
		if style != "" {
			ppr = `<w:pPr><w:pStyle w:val="` + style + `"/></w:pPr>`
		}
		return `<w:p>` + ppr + `<w:r><w:t xml:space="preserve">` + text + `</w:t></w:r></w:p>`
	}
	item := func(text string) string {
		return `<w:p><w:pPr><w:pStyle w:val="ListParagraph"/><w:numPr><w:ilvl w:val="0"/><w:numId w:val="1"/></w:numPr></w:pPr><w:r><w:t>` + text + `</w:t></w:r></w:p>`
	}
	cell := func(text string) string { return `<w:tc><w:p><w:r><w:t>` + text + `</w:t></w:r></w:p></w:tc>` }
	row := func(cells ...string) string {
		var b strings.Builder
		b.WriteString("<w:tr>")
		for _, c := range cells {
			b.WriteString(cell(c))
		}
		b.WriteString("</w:tr>")
		return b.String()
	}
	body := p("Title", "Field Trip to the Lake") +
		p("", "Class 4B spends a day by the lake on Friday 14 June. This note tells parents how the day runs and what to pack.") +
		p("Heading1", "Getting there") +
		p("", "The coach leaves the school gate at 8:30 and returns by 16:00. Children who feel unwell on coaches should sit at the front.") +
		p("Heading1", "What to bring") +
		item("Sun cream and a hat") +
		item("A refillable water bottle") +
		item("Shoes that can get wet") +
		p("Heading2", "Lunch") +
		p("", "The school provides lunch; tell us about allergies by Monday.") +
		`<w:tbl><w:tblPr><w:tblStyle w:val="TableGrid"/></w:tblPr>` +
		row("Item", "Quantity", "Notes") + row("Sandwiches", "30", "one each") + row("Apples", "40", "spares for the drivers") +
		`</w:tbl>` +
		p("", "Questions go to the class teacher.")
	styles := `<?xml version="1.0" encoding="UTF-8"?><w:styles xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">` +
		`<w:style w:type="paragraph" w:default="1" w:styleId="Normal"><w:name w:val="Normal"/></w:style>` +
		`<w:style w:type="paragraph" w:styleId="Title"><w:name w:val="Title"/><w:basedOn w:val="Normal"/></w:style>` +
		`<w:style w:type="paragraph" w:styleId="Heading1"><w:name w:val="heading 1"/><w:basedOn w:val="Normal"/><w:pPr><w:outlineLvl w:val="0"/></w:pPr></w:style>` +
		`<w:style w:type="paragraph" w:styleId="Heading2"><w:name w:val="heading 2"/><w:basedOn w:val="Normal"/><w:pPr><w:outlineLvl w:val="1"/></w:pPr></w:style>` +
		`<w:style w:type="paragraph" w:styleId="ListParagraph"><w:name w:val="List Paragraph"/><w:basedOn w:val="Normal"/></w:style>` +
		`<w:style w:type="table" w:styleId="TableGrid"><w:name w:val="Table Grid"/></w:style>` +
		`</w:styles>`
	return DOCX(body, map[string]string{
		"[Content_Types].xml": `<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">` +
			`<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/>` +
			`<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>` +
			`<Override PartName="/word/styles.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.styles+xml"/>` +
			`<Override PartName="/docProps/core.xml" ContentType="application/vnd.openxmlformats-package.core-properties+xml"/></Types>`,
		"_rels/.rels": `<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">` +
			`<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/>` +
			`<Relationship Id="rId2" Type="http://schemas.openxmlformats.org/package/2006/relationships/metadata/core-properties" Target="docProps/core.xml"/></Relationships>`,
		"word/_rels/document.xml.rels": `<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">` +
			`<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/styles" Target="styles.xml"/></Relationships>`,
		"word/styles.xml": styles,
		"docProps/core.xml": `<?xml version="1.0" encoding="UTF-8"?><cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties" xmlns:dc="http://purl.org/dc/elements/1.1/">` +
			`<dc:title>Field Trip to the Lake</dc:title><dc:creator>Class 4B</dc:creator></cp:coreProperties>`,
	})
}

// Trip writes [TripDOCX] to dir/field-trip.docx and returns the path.
func Trip(tb testing.TB, dir string) string {
	tb.Helper()
	return Write(tb, dir, TripName, TripDOCX())
}
