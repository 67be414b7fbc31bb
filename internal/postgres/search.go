package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"datachat"
	"datachat/internal/record"
)

// SearchConversations lists the user's conversations whose title or any
// message's text holds term, compared as lower(…), most recently updated
// first, with the first matching message's snippet. It scans the user's
// conversations and their messages (strpos has no index); a user's own
// history is small enough for that.
func (s *Store) SearchConversations(ctx context.Context, userID, term string, limit int) ([]*datachat.ConversationMatch, error) {
	term = datachat.SearchTerm(term)
	if term == "" || limit <= 0 {
		return []*datachat.ConversationMatch{}, nil
	}
	rows, err := s.pool.Query(ctx, `
		SELECT `+record.ConversationColumns+`, hit FROM (
			SELECT c.*, (SELECT m.content FROM messages m
				WHERE m.conversation_id = c.id AND strpos(lower(m.content), $1) > 0
				ORDER BY m.created_at, m.row_seq LIMIT 1) AS hit
			FROM conversations c WHERE c.user_id = $2) found
		WHERE strpos(lower(title), $1) > 0 OR hit IS NOT NULL
		ORDER BY updated_at DESC, row_seq DESC LIMIT $3`, term, userID, limit)
	if err != nil {
		return nil, fmt.Errorf("search conversations: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*datachat.ConversationMatch, error) {
		var hit *string
		c, err := decode.Conversation(withExtra{row, []any{&hit}})
		if err != nil {
			return nil, err
		}
		m := &datachat.ConversationMatch{Conversation: c}
		if hit != nil {
			m.Snippet = datachat.SearchSnippet(*hit, term, 160)
		}
		return m, nil
	})
	if err != nil {
		return nil, fmt.Errorf("search conversations: %w", err)
	}
	return record.NonNil(list), nil
}

// withExtra scans the columns a decoder reads, then extra ones after them.
type withExtra struct {
	sc    record.Scanner
	extra []any
}

func (w withExtra) Scan(dest ...any) error { return w.sc.Scan(append(dest, w.extra...)...) }
