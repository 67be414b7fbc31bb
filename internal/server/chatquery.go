package server

import (
	"errors"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"datachat"
	"datachat/internal/chat"
)

// chatQueryRequest is spec 003's ChatQueryRequest.
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

// chatQueryResponse is spec 003's ChatQueryResponse.
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

// chatQuery answers one question in one request (spec 003), running the same
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
	var convID string
	if req.ConversationID != nil && *req.ConversationID != "" {
		c, err := s.Store.Conversation(ctx, user.ID, *req.ConversationID)
		if err != nil {
			s.error(w, r, err)
			return
		}
		convID = c.ID
	} else {
		c := &datachat.Conversation{UserID: user.ID, Title: titleFrom(query)}
		if err := s.Store.CreateConversation(ctx, c); err != nil {
			s.error(w, r, err)
			return
		}
		convID = c.ID
	}
	out, err := s.Chat.Send(ctx, user, convID, query, opts, nil)
	if err != nil {
		s.error(w, r, turnError(err))
		return
	}
	total := float64(time.Since(start).Microseconds()) / 1000
	tokens := out.Usage.Input + out.Usage.Output
	answer := strings.TrimSpace(out.Message.Content)
	// The checks count characters of the stored text; the answer drops its
	// leading white space.
	shift := utf8.RuneCountInString(out.Message.Content) - utf8.RuneCountInString(strings.TrimLeft(out.Message.Content, " \t\r\n"))
	checks := make([]datachat.NumberCheck, len(out.Message.NumberChecks))
	for i, c := range out.Message.NumberChecks {
		c.Start, c.End = c.Start-shift, c.End-shift
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

// turnOptions validates spec 003's override against its ranges and the
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
			if *k <= 0 || *k > 50 {
				return opts, datachat.Errorf(datachat.EINVALID, "override.top_k must be from 1 to 50, got %d.", *k)
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

// checkFilters allows only CHAT_ALLOWED_METADATA_KEYS, with string or
// list-of-string values.
func (s *Server) checkFilters(filters map[string]any) error {
	for k, v := range filters {
		allowed := false
		for _, a := range s.AllowedMetadataKeys {
			allowed = allowed || a == k
		}
		if !allowed {
			if len(s.AllowedMetadataKeys) == 0 {
				return datachat.Errorf(datachat.EINVALID, "Metadata filter key %q is not allowed: no filter keys are enabled (CHAT_ALLOWED_METADATA_KEYS).", k)
			}
			return datachat.Errorf(datachat.EINVALID, "Metadata filter key %q is not allowed; allowed keys: %s.", k, strings.Join(s.AllowedMetadataKeys, ", "))
		}
		switch v := v.(type) {
		case string:
		case []any:
			for _, e := range v {
				if _, ok := e.(string); !ok {
					return datachat.Errorf(datachat.EINVALID, "Metadata filter %q: list values must be strings.", k)
				}
			}
		default:
			return datachat.Errorf(datachat.EINVALID, "Metadata filter %q: the value must be a string or a list of strings.", k)
		}
	}
	return nil
}

// turnError maps errors of a turn to the HTTP error they answer with, found
// anywhere in err's chain: the same classification as a chat_error
// (chat.ErrorEventFor), rendered as one message.
func turnError(err error) error {
	var rl *chat.RateLimitError
	var pe *datachat.ProviderError
	var se *chat.SaveError
	switch {
	case errors.As(err, &rl):
		return rateLimited{rl}
	case errors.As(err, &pe):
		return datachat.WrapError(datachat.EPROVIDER, eventText(chat.ErrorEventFor(err)), err)
	case errors.As(err, &se) && datachat.ErrorCode(err) == datachat.EINTERNAL:
		// Not saved for a reason the store did not name: the answer is kept
		// and saved when it can be, as the event says.
		return datachat.WrapError(datachat.EBUSY, eventText(chat.ErrorEventFor(err)), err)
	}
	return err
}

// eventText is a chat_error as one sentence after another.
func eventText(ev chat.ErrorEvent) string {
	msg := ev.Message
	for _, s := range []string{ev.Reason, ev.SuggestedAction} {
		if s != "" {
			msg += " " + s
		}
	}
	return msg
}

// rateLimited is a rate-limit refusal: 429 with Retry-After.
type rateLimited struct{ *chat.RateLimitError }

func (e rateLimited) Unwrap() error {
	return &datachat.Error{Code: datachat.ERATELIMIT, Message: e.Message}
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
