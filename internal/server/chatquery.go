package server

import (
	"context"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"datachat"
	"datachat/internal/chat"
	"datachat/internal/retrieval"
)

// chatQueryRequest is the body of POST /chat/query.
type chatQueryRequest struct {
	Query           string         `json:"query"`
	ConversationID  *string        `json:"conversation_id"`
	MetadataFilters map[string]any `json:"metadata_filters"`
	Override        *struct {
		Temperature       *float64 `json:"temperature"`
		TopK              *int     `json:"top_k"`
		MaxOutputTokens   *int     `json:"max_output_tokens"`
		IncludeEmbeddings *bool    `json:"include_embeddings"`
	} `json:"override"`
}

// chatQueryResponse is the answer of POST /chat/query.
type chatQueryResponse struct {
	ConversationID string            `json:"conversation_id"`
	Answer         string            `json:"answer"`
	Sources        []datachat.Source `json:"sources"`
	Usage          usageMetrics      `json:"usage"`
	RequestID      string            `json:"request_id"`
	// Confirmation is set when the assistant waits for the user to approve an
	// action; answer it over the WebSocket with confirm_action.
	Confirmation *chat.ConfirmationEvent `json:"confirmation,omitempty"`
	// NumberChecks are the answer's numbers checked against its evidence,
	// their offsets counted in characters of Answer.
	NumberChecks []datachat.NumberCheck `json:"number_checks"`
}

type usageMetrics struct {
	EmbeddingMS  float64 `json:"embedding_ms"`
	RetrievalMS  float64 `json:"retrieval_ms"`
	GenerationMS float64 `json:"generation_ms"`
	TotalMS      float64 `json:"total_ms"`
	TotalTokens  *int64  `json:"total_tokens"`
}

// chatQuery answers one question in one request, running the same
// turn as the WebSocket.
func (s *Server) chatQuery(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	ctx := r.Context()
	user := UserFrom(ctx)
	var req chatQueryRequest
	if err := decodeJSON(w, r, &req); err != nil {
		s.error(w, r, err)
		return
	}
	opts, err := s.turnOptions(&req)
	if err != nil {
		s.error(w, r, err)
		return
	}
	query, err := chat.CleanQuery(req.Query, s.Chat.MaxQueryChars)
	if err != nil {
		s.error(w, r, err)
		return
	}
	var id string
	if req.ConversationID != nil {
		id = *req.ConversationID
	}
	conv, _, err := s.conversationFor(ctx, user, id, query)
	if err != nil {
		s.error(w, r, err)
		return
	}
	convID := conv.ID
	out, err := s.Chat.Send(ctx, user, convID, query, opts, nil)
	if rev := revocation(ctx); rev != nil {
		// The key was revoked while the turn ran: it stopped, and its
		// answer is stored cancelled.
		s.error(w, r, rev)
		return
	}
	if err != nil {
		s.error(w, r, turnError(err))
		return
	}
	total := float64(time.Since(start).Microseconds()) / 1000
	tokens := out.Usage.Input + out.Usage.Output
	// The answer's parts that a tool call separates are paragraphs, as the
	// page shows them. The checks count characters of the stored text: moved
	// to the same characters of the answer, which also drops its leading
	// white space.
	joined, moved := partsText(out.Message.Parts, out.Message.Content)
	answer := strings.TrimSpace(joined)
	shift := utf8.RuneCountInString(joined) - utf8.RuneCountInString(strings.TrimLeft(joined, " \t\r\n"))
	checks := make([]datachat.NumberCheck, len(out.Message.NumberChecks))
	for i, c := range out.Message.NumberChecks {
		c.Start, c.End = moved(c.Start)-shift, moved(c.End-1)+1-shift
		checks[i] = c
	}
	resp := chatQueryResponse{
		ConversationID: convID,
		Answer:         answer,
		NumberChecks:   checks,
		Sources:        out.Sources,
		Usage: usageMetrics{
			EmbeddingMS:  out.EmbeddingMS,
			RetrievalMS:  out.RetrievalMS,
			GenerationMS: max(0, total-out.RetrievalMS),
			TotalMS:      total,
			TotalTokens:  &tokens,
		},
		RequestID: RequestID(ctx),
	}
	if c := out.Confirmation; c != nil {
		resp.Confirmation = &chat.ConfirmationEvent{ID: c.ID, Action: c.Action, Parameters: c.Parameters, Explanation: c.Explanation}
		if resp.Answer == "" {
			resp.Answer = c.Explanation
		}
	}
	writeJSON(w, http.StatusOK, resp)
}

// partsText joins an answer's text parts as the page shows them, with a
// paragraph break where a tool call separates two, and returns with it the
// map from a character's offset in the stored text (its parts' text run
// together) to its offset in the joined one. Parts that do not add up to
// the stored text leave it as it is.
func partsText(parts []datachat.Part, stored string) (string, func(int) int) {
	same := func(i int) int { return i }
	if datachat.PartsText(parts) != stored {
		return stored, same
	}
	var b strings.Builder
	type span struct{ from, to, shift int } // stored offsets [from, to) move by shift
	var spans []span
	storedAt, added := 0, 0
	afterTool := false
	for _, p := range parts {
		if p.Type != datachat.PartText {
			afterTool = true
			continue
		}
		if afterTool && b.Len() > 0 {
			br := chat.PartBreak(lastChars(b.String(), 2))
			b.WriteString(br)
			added += utf8.RuneCountInString(br)
		}
		afterTool = false
		n := utf8.RuneCountInString(p.Text)
		spans = append(spans, span{storedAt, storedAt + n, added})
		storedAt += n
		b.WriteString(p.Text)
	}
	return b.String(), func(i int) int {
		for _, s := range spans {
			if i >= s.from && i < s.to {
				return i + s.shift
			}
		}
		return i + added
	}
}

// turnOptions validates a request's override (temperature, top_k, max tokens, model)
// against its ranges and the
// metadata filters against CHAT_ALLOWED_METADATA_KEYS.
func (s *Server) turnOptions(req *chatQueryRequest) (chat.TurnOptions, error) {
	var opts chat.TurnOptions
	if o := req.Override; o != nil {
		if t := o.Temperature; t != nil {
			if *t < 0 || *t > 2 {
				return opts, datachat.Errorf(datachat.EINVALID, "override.temperature must be from 0.0 to 2.0, got %g.", *t)
			}
			opts.Temperature = t
		}
		if k := o.TopK; k != nil {
			if *k <= 0 || *k > datachat.MaxTopK {
				return opts, datachat.Errorf(datachat.EINVALID, "override.top_k must be from 1 to %d, got %d.", datachat.MaxTopK, *k)
			}
			opts.TopK = *k
		}
		if m := o.MaxOutputTokens; m != nil {
			if *m <= 0 || *m > 8192 {
				return opts, datachat.Errorf(datachat.EINVALID, "override.max_output_tokens must be from 1 to 8192, got %d.", *m)
			}
			opts.MaxOutputTokens = *m
		}
	}
	if err := s.checkFilters(req.MetadataFilters); err != nil {
		return opts, err
	}
	opts.Filters = req.MetadataFilters
	return opts, nil
}

// checkFilters allows only CHAT_ALLOWED_METADATA_KEYS, by retrieval's one
// rule for filters from outside.
func (s *Server) checkFilters(filters map[string]any) error {
	return retrieval.CheckFilters(filters, s.cfg.AllowedMetadataKeys)
}

// conversationFor is the user's conversation id (surrounding space ignored),
// or, when id is empty, a new conversation titled from its first question;
// created tells which.
func (s *Server) conversationFor(ctx context.Context, user *datachat.User, id, question string) (c *datachat.Conversation, created bool, err error) {
	if id = strings.TrimSpace(id); id != "" {
		c, err = s.Store.Conversation(ctx, user.ID, id)
		return c, false, err
	}
	c = &datachat.Conversation{UserID: user.ID, Title: titleFrom(question)}
	if err := s.Store.CreateConversation(ctx, c); err != nil {
		return nil, false, err
	}
	return c, true, nil
}

// titleFrom makes a conversation title from its first question.
func titleFrom(q string) string {
	q = strings.Join(strings.Fields(q), " ")
	if utf8.RuneCountInString(q) <= 60 {
		return q
	}
	r := []rune(q)
	return strings.TrimSpace(string(r[:59])) + "…"
}
