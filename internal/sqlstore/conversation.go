package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"datachat"
	"datachat/internal/record"
)

// CreateConversation stores c; ENOTFOUND if its user does not exist.
func (s *Store) CreateConversation(ctx context.Context, c *datachat.Conversation) error {
	record.Fill(&c.ID, &c.CreatedAt, &c.UpdatedAt)
	_, err := s.write.Exec(ctx, `
		INSERT INTO conversations (id, user_id, title, created_at, updated_at) VALUES (?, ?, ?, ?, ?)`,
		c.ID, c.UserID, c.Title, s.d.Time(c.CreatedAt), s.d.Time(c.UpdatedAt))
	return s.writeError(err, "create conversation", "user not found", "conversation already exists")
}

// Conversation returns the user's conversation; ENOTFOUND if there is none or
// it belongs to another user.
func (s *Store) Conversation(ctx context.Context, userID, id string) (*datachat.Conversation, error) {
	c, err := s.d.Decode.Conversation(s.read.QueryRow(ctx,
		`SELECT `+record.ConversationColumns+` FROM conversations WHERE id = ? AND user_id = ?`, id, userID))
	if err != nil {
		return nil, NotFoundIfNoRows(err, "get conversation", "conversation not found")
	}
	return c, nil
}

// Conversations lists a user's conversations, most recently updated first.
func (s *Store) Conversations(ctx context.Context, userID string) ([]*datachat.Conversation, error) {
	return QueryAll(ctx, s.read, s.d.Decode.Conversation, "list conversations", `SELECT `+record.ConversationColumns+` FROM conversations
		WHERE user_id = ? ORDER BY updated_at DESC, `+s.d.RowSeq+` DESC`, userID)
}

// RenameConversation sets the title and bumps UpdatedAt.
func (s *Store) RenameConversation(ctx context.Context, userID, id, title string) (*datachat.Conversation, error) {
	c, err := s.d.Decode.Conversation(s.write.QueryRow(ctx, `
		UPDATE conversations SET title = ?, updated_at = `+s.d.Greatest+`(updated_at, ?)
		WHERE id = ? AND user_id = ?
		RETURNING `+record.ConversationColumns, title, s.d.Time(record.Now()), id, userID))
	if err != nil {
		return nil, NotFoundIfNoRows(err, "rename conversation", "conversation not found")
	}
	return c, nil
}

// DeleteConversation removes a conversation and, by cascade, everything in it.
func (s *Store) DeleteConversation(ctx context.Context, userID, id string) error {
	n, err := s.write.Exec(ctx, `DELETE FROM conversations WHERE id = ? AND user_id = ?`, id, userID)
	return mustAffect(n, err, "delete conversation", "conversation not found")
}

// CreateMessage stores m and bumps the conversation's UpdatedAt; ENOTFOUND if
// the conversation does not exist.
func (s *Store) CreateMessage(ctx context.Context, m *datachat.Message) error {
	record.Fill(&m.ID, &m.CreatedAt, &m.UpdatedAt)
	err := s.writeTx(ctx, func(tx DB) error {
		_, err := tx.Exec(ctx, `
			INSERT INTO messages (id, conversation_id, role, content, status, input_tokens, output_tokens, error, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			m.ID, m.ConversationID, m.Role, m.Content, m.Status, m.InputTokens, m.OutputTokens, m.Error,
			s.d.Time(m.CreatedAt), s.d.Time(m.UpdatedAt))
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE conversations SET updated_at = `+s.d.Greatest+`(updated_at, ?) WHERE id = ?`,
			s.d.Time(m.CreatedAt), m.ConversationID)
		return err
	})
	return s.writeError(err, "create message", "conversation not found", "message already exists")
}

// UpdateMessage stores m's Content, Status, tokens, error fields and Sources, and sets its
// UpdatedAt; ENOTFOUND if there is no such message.
func (s *Store) UpdateMessage(ctx context.Context, m *datachat.Message) error {
	t := record.Now()
	sources, err := record.ListJSON(m.Sources)
	if err != nil {
		return fmt.Errorf("update message: %w", err)
	}
	n, err := s.write.Exec(ctx, `
		UPDATE messages SET content = ?, status = ?, input_tokens = ?, output_tokens = ?, error = ?,
			error_reason = ?, error_suggested_action = ?, sources = ?, updated_at = ?
		WHERE id = ?`,
		m.Content, m.Status, m.InputTokens, m.OutputTokens, m.Error, m.ErrorReason, m.ErrorSuggestedAction, sources, s.d.Time(t), m.ID)
	if err := mustAffect(n, err, "update message", "message not found"); err != nil {
		return err
	}
	m.UpdatedAt = t
	return nil
}

// AppendParts adds the newest parts of a streaming answer, numbered from
// first; parts already there (a retried append) are left as they are.
func (s *Store) AppendParts(ctx context.Context, messageID string, first int, parts []datachat.Part) error {
	if len(parts) == 0 {
		return nil
	}
	err := s.writeTx(ctx, func(tx DB) error {
		var one int
		if err := tx.QueryRow(ctx, `SELECT 1 FROM messages WHERE id = ?`, messageID).Scan(&one); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return datachat.Errorf(datachat.ENOTFOUND, "message not found")
			}
			return err
		}
		return s.d.InsertParts(ctx, tx, messageID, first, parts)
	})
	if err != nil && datachat.ErrorCode(err) != datachat.ENOTFOUND {
		return fmt.Errorf("append message parts: %w", err)
	}
	return err
}

// FinishMessage stores how an answer ended, its parts and its usage in one
// transaction.
func (s *Store) FinishMessage(ctx context.Context, m *datachat.Message, u *datachat.Usage) error {
	t := record.Now()
	sources, err := record.ListJSON(m.Sources)
	if err != nil {
		return fmt.Errorf("finish message: %w", err)
	}
	checks, err := record.ListJSON(m.NumberChecks)
	if err != nil {
		return fmt.Errorf("finish message: %w", err)
	}
	if u != nil {
		record.FillUsage(u)
	}
	err = s.writeTx(ctx, func(tx DB) error {
		n, err := tx.Exec(ctx, `
			UPDATE messages SET content = ?, status = ?, input_tokens = ?, output_tokens = ?, error = ?,
				error_reason = ?, error_suggested_action = ?, sources = ?, number_checks = ?, updated_at = ?
			WHERE id = ?`,
			m.Content, m.Status, m.InputTokens, m.OutputTokens, m.Error, m.ErrorReason, m.ErrorSuggestedAction, sources, checks, s.d.Time(t), m.ID)
		if err != nil {
			return err
		}
		if err := mustAffect(n, nil, "finish message", "message not found"); err != nil {
			return err
		}
		first, parts, replace := record.FinishParts(m)
		if replace {
			if _, err := tx.Exec(ctx, `DELETE FROM message_parts WHERE message_id = ?`, m.ID); err != nil {
				return err
			}
		}
		if err := s.d.InsertParts(ctx, tx, m.ID, first, parts); err != nil {
			return err
		}
		if u == nil {
			return nil
		}
		_, err = tx.Exec(ctx, `
			INSERT INTO token_usage (id, user_id, conversation_id, message_id, provider, model,
				input_tokens, output_tokens, success, estimated, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (id) DO NOTHING`,
			u.ID, u.UserID, u.ConversationID, u.MessageID, u.Provider, u.Model,
			u.InputTokens, u.OutputTokens, s.d.Bool(u.Success), s.d.Bool(u.Estimated), s.d.Time(u.CreatedAt))
		return err
	})
	switch {
	case datachat.ErrorCode(err) == datachat.ENOTFOUND:
		return err
	case err != nil:
		return fmt.Errorf("finish message: %w", err)
	}
	m.UpdatedAt = t
	return nil
}

// Messages returns a conversation's messages oldest first, each with its tool
// calls ordered by Seq.
func (s *Store) Messages(ctx context.Context, conversationID string) ([]*datachat.Message, error) {
	return s.messages(ctx, conversationID, s.d.NoLimit, true)
}

// RecentMessages returns the newest n messages of a conversation, oldest first,
// each with its tool calls.
func (s *Store) RecentMessages(ctx context.Context, conversationID string, n int) ([]*datachat.Message, error) {
	if n <= 0 {
		return []*datachat.Message{}, nil
	}
	return s.messages(ctx, conversationID, n, false)
}

// TurnStart reads what a turn starts from in one read transaction (one
// snapshot): the user's conversation, its pending confirmation (nil when
// none) and its newest n messages, as RecentMessages returns them.
func (s *Store) TurnStart(ctx context.Context, userID, conversationID string, n int) (*datachat.Conversation, *datachat.Confirmation, []*datachat.Message, error) {
	var (
		conv    *datachat.Conversation
		pending *datachat.Confirmation
		msgs    = []*datachat.Message{}
	)
	err := s.readTx(ctx, func(tx DB) error {
		var err error
		conv, err = s.d.Decode.Conversation(tx.QueryRow(ctx,
			`SELECT `+record.ConversationColumns+` FROM conversations WHERE id = ? AND user_id = ?`, conversationID, userID))
		if err != nil {
			return NotFoundIfNoRows(err, "get conversation", "conversation not found")
		}
		pending, err = s.d.Decode.Confirmation(tx.QueryRow(ctx, `SELECT `+record.ConfirmationColumns+` FROM confirmations
			WHERE conversation_id = ? AND status = 'pending'
			ORDER BY created_at DESC, `+s.d.RowSeq+` DESC LIMIT 1`, conversationID))
		if errors.Is(err, sql.ErrNoRows) {
			pending, err = nil, nil
		}
		if err != nil || n <= 0 {
			return err
		}
		msgs, err = s.messagesIn(ctx, tx, conversationID, n, false)
		return err
	})
	if err != nil {
		if datachat.ErrorCode(err) == datachat.ENOTFOUND {
			return nil, nil, nil, err
		}
		return nil, nil, nil, fmt.Errorf("start a turn: %w", err)
	}
	return conv, pending, msgs, nil
}

// messages lists the newest limit messages (all when limit is
// [Dialect.NoLimit]) in order, with their sources if withSources is set.
func (s *Store) messages(ctx context.Context, conversationID string, limit any, withSources bool) ([]*datachat.Message, error) {
	var msgs []*datachat.Message
	err := s.readTx(ctx, func(tx DB) error {
		var err error
		msgs, err = s.messagesIn(ctx, tx, conversationID, limit, withSources)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list messages: %w", err)
	}
	return msgs, nil
}

// messagesIn is messages in tx.
func (s *Store) messagesIn(ctx context.Context, tx DB, conversationID string, limit any, withSources bool) ([]*datachat.Message, error) {
	rows, err := tx.Query(ctx, `
		SELECT id, conversation_id, role, content, status, input_tokens, output_tokens, error,
			error_reason, error_suggested_action, created_at, updated_at, CASE WHEN ? THEN sources END,
			CASE WHEN ? THEN number_checks END
		FROM `+s.d.RecentMessages+`
		ORDER BY created_at, `+s.d.RowSeq, withSources, withSources, conversationID, limit)
	if err != nil {
		return nil, err
	}
	msgs, err := Collect(rows, s.d.Decode.Message)
	if err != nil || len(msgs) == 0 {
		return msgs, err
	}
	th := record.NewThread(msgs)
	rows, err = tx.Query(ctx, `
		SELECT `+record.ToolCallColumns+`
		FROM tool_calls t JOIN messages m ON m.id = t.message_id
		WHERE m.conversation_id = ? AND m.created_at >= ? ORDER BY t.message_id, t.seq, t.`+s.d.RowSeq,
		conversationID, s.d.Time(msgs[0].CreatedAt))
	if err != nil {
		return nil, err
	}
	calls, err := Collect(rows, s.d.Decode.ToolCall)
	if err != nil {
		return nil, err
	}
	for _, tc := range calls {
		th.AddToolCall(tc)
	}
	rows, err = tx.Query(ctx, `
		SELECT p.message_id, p.kind, p.text, p.call_id
		FROM message_parts p JOIN messages m ON m.id = p.message_id
		WHERE m.conversation_id = ? AND m.created_at >= ? ORDER BY p.message_id, p.seq`,
		conversationID, s.d.Time(msgs[0].CreatedAt))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var p datachat.Part
		if err := rows.Scan(&id, &p.Type, &p.Text, &p.CallID); err != nil {
			return nil, err
		}
		th.AddPart(id, p)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return th.Messages(), nil
}

// RenewLease sets a message's lease; ENOTFOUND if there is no such message.
func (s *Store) RenewLease(ctx context.Context, messageID string, lease datachat.Lease) error {
	n, err := s.write.Exec(ctx,
		`UPDATE messages SET lease_owner = ?, lease_node = ?, lease_until = ? WHERE id = ?`,
		lease.Owner, lease.Node, s.d.Time(lease.Until), messageID)
	return mustAffect(n, err, "renew lease", "message not found")
}

// CreateToolCall stores one tool round of a message; ENOTFOUND if the message
// does not exist, EINVALID if Args is not JSON. A zero StartedAt is set to now.
func (s *Store) CreateToolCall(ctx context.Context, tc *datachat.ToolCall) error {
	if err := record.FillToolCall(tc); err != nil {
		return err
	}
	cols, err := record.ListJSON(tc.Columns)
	if err != nil {
		return fmt.Errorf("create tool call: %w", err)
	}
	_, err = s.write.Exec(ctx, `
		INSERT INTO tool_calls (id, message_id, seq, call_id, tool, args, ok, result, error, started_at, duration_ms, columns)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		tc.ID, tc.MessageID, tc.Seq, tc.CallID, tc.Tool, record.RawJSON(tc.Args), s.d.Bool(tc.OK), tc.Result, tc.Error,
		s.d.Time(tc.StartedAt), tc.DurationMS, cols)
	return s.writeError(err, "create tool call", "message not found", "tool call already exists")
}
