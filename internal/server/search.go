package server

import (
	"net/http"
	"unicode/utf8"

	"datachat"
)

// searchConversations is GET /api/search?q=…: the user's conversations
// whose title or messages hold q (ignoring case), most recently updated
// first, each with the words around the first match in a message.
func (s *Server) searchConversations(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query().Get("q")
	if n := utf8.RuneCountInString(q); n > datachat.MaxSearchQuery {
		s.error(w, r, datachat.Errorf(datachat.EINVALID, "The search is %d characters long; search for at most %d.", n, datachat.MaxSearchQuery))
		return
	}
	found, err := s.Store.SearchConversations(r.Context(), UserFrom(r.Context()).ID, q, datachat.MaxSearchResults)
	if err != nil {
		s.error(w, r, err)
		return
	}
	writeList(w, "conversations", found)
}
