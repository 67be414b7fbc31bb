package extract

import (
	"strings"

	"datachat"
)

// Formats are the documents Extract reads, by the extensions detect goes
// by (PDF and Word files are also known by their content). The web page's
// drop zones, file picker and messages are built from this list
// (GET /api/formats).
var Formats = []datachat.FileFormat{
	{Name: "PDF", Extensions: []string{".pdf"}},
	{Name: "Word (DOCX)", Extensions: []string{".docx"}},
	{Name: "Markdown", Extensions: []string{".md", ".markdown", ".mdown", ".mkd", ".mdx"}},
	{Name: "HTML", Extensions: []string{".html", ".htm", ".xhtml"}},
	{Name: "text", Extensions: []string{".txt", ".text", ".log", ".rst", ".adoc"}},
}

// formatMedia is the media type of each of Formats, in order.
var formatMedia = []string{MediaPDF, MediaDOCX, MediaMarkdown, MediaHTML, MediaText}

// mediaOfExt is the media type a file name extension (lower case, with the
// dot) names among Formats, or "".
func mediaOfExt(ext string) string {
	for i, f := range Formats {
		for _, e := range f.Extensions {
			if e == ext {
				return formatMedia[i]
			}
		}
	}
	return ""
}

// IsDocumentName reports whether a file name has one of Formats' extensions.
func IsDocumentName(name string) bool {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		return mediaOfExt(strings.ToLower(name[i:])) != ""
	}
	return false
}
