package sqlstore

import (
	"context"

	"datachat"
	"datachat/internal/record"
)

// SearchConversations lists the user's conversations whose title or any
// message's text holds term, compared as lower(…), most recently updated
// first, with the first matching message's snippet. It scans the user's
// conversations and their messages ([Dialect.Position] has no index); a
// user's own history is small enough for that.
func (s *Store) SearchConversations(ctx context.Context, userID, term string, limit int) ([]*datachat.ConversationMatch, error) {
	term = datachat.SearchTerm(term)
	if term == "" || limit <= 0 {
		return []*datachat.ConversationMatch{}, nil
	}
	list, err := QueryAll(ctx, s.read, func(sc record.Scanner) (*datachat.ConversationMatch, error) {
		var hit *string // the first matching message's text, if any
		c, err := s.d.Decode.Conversation(record.Also(sc, &hit))
		if err != nil {
			return nil, err
		}
		m := &datachat.ConversationMatch{Conversation: c}
		if hit != nil {
			m.Snippet = datachat.SearchSnippet(*hit, term, 160)
		}
		return m, nil
	}, "search conversations", `
		SELECT `+record.ConversationColumns+`, hit FROM (
			SELECT c.*, c.`+s.d.RowSeq+` AS seq, (SELECT m.content FROM messages m
				WHERE m.conversation_id = c.id AND `+s.d.Position+`(lower(m.content), ?) > 0
				ORDER BY m.created_at, m.`+s.d.RowSeq+` LIMIT 1) AS hit
			FROM conversations c WHERE c.user_id = ?) found
		WHERE `+s.d.Position+`(lower(title), ?) > 0 OR hit IS NOT NULL
		ORDER BY updated_at DESC, seq DESC LIMIT ?`, term, userID, term, limit)
	if err != nil {
		return nil, err
	}
	return list, nil
}
