package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"datachat"
	"datachat/internal/record"
)

// SearchConversations lists the user's conversations whose title or any
// message's text holds term, compared as lower(…) (ASCII case folded),
// most recently updated first, with the first matching message's snippet.
// It scans the user's conversations and their messages (instr has no
// index); a user's own history is small enough for that.
func (s *Store) SearchConversations(ctx context.Context, userID, term string, limit int) ([]*datachat.ConversationMatch, error) {
	term = datachat.SearchTerm(term)
	if term == "" || limit <= 0 {
		return []*datachat.ConversationMatch{}, nil
	}
	rows, err := s.read.QueryContext(ctx, `
		SELECT `+record.ConversationColumns+`, hit FROM (
			SELECT c.*, c.rowid AS seq, (SELECT m.content FROM messages m
				WHERE m.conversation_id = c.id AND instr(lower(m.content), ?1) > 0
				ORDER BY m.created_at, m.rowid LIMIT 1) AS hit
			FROM conversations c WHERE c.user_id = ?2)
		WHERE instr(lower(title), ?1) > 0 OR hit IS NOT NULL
		ORDER BY updated_at DESC, seq DESC LIMIT ?3`, term, userID, limit)
	if err != nil {
		return nil, fmt.Errorf("search conversations: %w", err)
	}
	list, err := collectMatches(rows, term)
	if err != nil {
		return nil, fmt.Errorf("search conversations: %w", err)
	}
	return list, nil
}

// collectMatches reads SearchConversations' rows: a conversation's
// columns, then the matching message's text (NULL for none).
func collectMatches(rows *sql.Rows, term string) ([]*datachat.ConversationMatch, error) {
	defer rows.Close()
	out := []*datachat.ConversationMatch{}
	for rows.Next() {
		var hit sql.NullString
		c, err := decode.Conversation(withExtra{rows, []any{&hit}})
		if err != nil {
			return nil, err
		}
		out = append(out, &datachat.ConversationMatch{Conversation: c, Snippet: datachat.SearchSnippet(hit.String, term, 160)})
	}
	return out, rows.Err()
}

// withExtra scans the columns a decoder reads, then extra ones after them.
type withExtra struct {
	sc    record.Scanner
	extra []any
}

func (w withExtra) Scan(dest ...any) error { return w.sc.Scan(append(dest, w.extra...)...) }
