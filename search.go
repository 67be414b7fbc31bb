package datachat

import (
	"strings"
	"unicode/utf8"
)

// ConversationMatch is a conversation a search found
// ([ConversationStore.SearchConversations]): by its title, or by the text of one of
// its messages, of which Snippet holds the words around the first match
// ("" when only the title matched).
type ConversationMatch struct {
	*Conversation
	Snippet string `json:"snippet"`
}

// MaxSearchResults is how many conversations a search returns at most.
const MaxSearchResults = 50

// MaxSearchQuery is the longest search, in characters.
const MaxSearchQuery = 200

// SearchTerm is how the stores compare a search: trimmed and lower case
// (they compare it with the lower-cased title and text; SQLite's lower()
// folds ASCII letters only, so the stores agree on ASCII case only).
func SearchTerm(q string) string {
	return strings.ToLower(strings.TrimSpace(q))
}

// SearchSnippet is the part of text around the first place term (as
// [SearchTerm] gives it) occurs, about width characters, with "…" where it
// was cut; "" when term is empty, the start of text when term is not found.
func SearchSnippet(text, term string, width int) string {
	if term == "" {
		return ""
	}
	lower := strings.ToLower(text)
	i := strings.Index(lower, term)
	if len(lower) != len(text) { // lower-casing moved the offsets
		i = strings.Index(text, term)
	}
	return cutAround(text, max(i, 0), width)
}

// cutAround cuts text to about width characters around byte offset i.
func cutAround(text string, i, width int) string {
	start := i
	for n := 0; start > 0 && n < width/3; n++ {
		_, size := utf8.DecodeLastRuneInString(text[:start])
		start -= size
	}
	end := i
	for n := 0; end < len(text) && n < width-width/3; n++ {
		_, size := utf8.DecodeRuneInString(text[end:])
		end += size
	}
	out := strings.Join(strings.Fields(text[start:end]), " ")
	if start > 0 {
		out = "…" + out
	}
	if end < len(text) {
		out += "…"
	}
	return out
}
