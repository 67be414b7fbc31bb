package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"datachat"
	"datachat/internal/record"
)

// CreateConversation stores c; ENOTFOUND if its user does not exist.
func (s *Store) CreateConversation(ctx context.Context, c *datachat.Conversation) error {
	record.Fill(&c.ID, &c.CreatedAt, &c.UpdatedAt)
	_, err := s.write.ExecContext(ctx, `
		INSERT INTO conversations (id, user_id, title, created_at, updated_at) VALUES (?, ?, ?, ?, ?)`,
		c.ID, c.UserID, c.Title, ts(c.CreatedAt), ts(c.UpdatedAt))
	return writeError(err, "create conversation", "user not found", "conversation already exists")
}

// Conversation returns the user's conversation; ENOTFOUND if there is none or
// it belongs to another user.
func (s *Store) Conversation(ctx context.Context, userID, id string) (*datachat.Conversation, error) {
	c, err := decode.Conversation(s.read.QueryRowContext(ctx,
		`SELECT `+record.ConversationColumns+` FROM conversations WHERE id = ? AND user_id = ?`, id, userID))
	if err != nil {
		return nil, notFoundIfNoRows(err, "get conversation", "conversation not found")
	}
	return c, nil
}

// Conversations lists a user's conversations, most recently updated first.
func (s *Store) Conversations(ctx context.Context, userID string) ([]*datachat.Conversation, error) {
	return queryAll(ctx, s.read, decode.Conversation, "list conversations", `SELECT `+record.ConversationColumns+` FROM conversations
		WHERE user_id = ? ORDER BY updated_at DESC, rowid DESC`, userID)
}

// RenameConversation sets the title and bumps UpdatedAt.
func (s *Store) RenameConversation(ctx context.Context, userID, id, title string) (*datachat.Conversation, error) {
	c, err := decode.Conversation(s.write.QueryRowContext(ctx, `
		UPDATE conversations SET title = ?, updated_at = MAX(updated_at, ?)
		WHERE id = ? AND user_id = ?
		RETURNING `+record.ConversationColumns, title, ts(record.Now()), id, userID))
	if err != nil {
		return nil, notFoundIfNoRows(err, "rename conversation", "conversation not found")
	}
	return c, nil
}

// DeleteConversation removes a conversation and, by cascade, everything in it.
func (s *Store) DeleteConversation(ctx context.Context, userID, id string) error {
	res, err := s.write.ExecContext(ctx, `DELETE FROM conversations WHERE id = ? AND user_id = ?`, id, userID)
	if err != nil {
		return fmt.Errorf("delete conversation: %w", err)
	}
	return mustAffect(res, "delete conversation", "conversation not found")
}

// CreateMessage stores m and bumps the conversation's UpdatedAt; ENOTFOUND if
// the conversation does not exist.
func (s *Store) CreateMessage(ctx context.Context, m *datachat.Message) error {
	record.Fill(&m.ID, &m.CreatedAt, &m.UpdatedAt)
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `
			INSERT INTO messages (id, conversation_id, role, content, status, input_tokens, output_tokens, error, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			m.ID, m.ConversationID, m.Role, m.Content, m.Status, m.InputTokens, m.OutputTokens, m.Error,
			ts(m.CreatedAt), ts(m.UpdatedAt))
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE conversations SET updated_at = MAX(updated_at, ?) WHERE id = ?`,
			ts(m.CreatedAt), m.ConversationID)
		return err
	})
	return writeError(err, "create message", "conversation not found", "message already exists")
}

// UpdateMessage stores m's Content, Status, tokens, error fields and Sources, and sets its
// UpdatedAt; ENOTFOUND if there is no such message.
func (s *Store) UpdateMessage(ctx context.Context, m *datachat.Message) error {
	t := record.Now()
	sources, err := record.ListJSON(m.Sources)
	if err != nil {
		return fmt.Errorf("update message: %w", err)
	}
	res, err := s.write.ExecContext(ctx, `
		UPDATE messages SET content = ?, status = ?, input_tokens = ?, output_tokens = ?, error = ?,
			error_reason = ?, error_suggested_action = ?, sources = ?, updated_at = ?
		WHERE id = ?`,
		m.Content, m.Status, m.InputTokens, m.OutputTokens, m.Error, m.ErrorReason, m.ErrorSuggestedAction, sources, ts(t), m.ID)
	if err != nil {
		return fmt.Errorf("update message: %w", err)
	}
	if err := mustAffect(res, "update message", "message not found"); err != nil {
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
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		var one int
		if err := tx.QueryRowContext(ctx, `SELECT 1 FROM messages WHERE id = ?`, messageID).Scan(&one); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return datachat.Errorf(datachat.ENOTFOUND, "message not found")
			}
			return err
		}
		return insertParts(ctx, tx, messageID, first, parts)
	})
	if err != nil && datachat.ErrorCode(err) != datachat.ENOTFOUND {
		return fmt.Errorf("append message parts: %w", err)
	}
	return err
}

func insertParts(ctx context.Context, tx *sql.Tx, messageID string, first int, parts []datachat.Part) error {
	for i, p := range parts {
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO message_parts (message_id, seq, kind, text, call_id) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (message_id, seq) DO NOTHING`,
			messageID, first+i, p.Type, p.Text, p.CallID); err != nil {
			return err
		}
	}
	return nil
}

// FlushStreaming writes the new parts and leases of many streaming messages
// in one transaction, skipping (and returning) those that no longer exist.
func (s *Store) FlushStreaming(ctx context.Context, batch []datachat.StreamingFlush) ([]string, error) {
	var gone []string
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		gone = nil
		for _, f := range batch {
			if f.Lease == nil && len(f.Parts) == 0 {
				continue
			}
			ok, err := flushOne(ctx, tx, f)
			if err != nil {
				return err
			}
			if !ok {
				gone = append(gone, f.MessageID)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("flush streaming messages: %w", err)
	}
	return gone, nil
}

// flushOne writes one message's share of a flush; false if the message is
// gone.
func flushOne(ctx context.Context, tx *sql.Tx, f datachat.StreamingFlush) (bool, error) {
	if f.Lease != nil {
		res, err := tx.ExecContext(ctx,
			`UPDATE messages SET lease_owner = ?, lease_node = ?, lease_until = ? WHERE id = ?`,
			f.Lease.Owner, f.Lease.Node, ts(f.Lease.Until), f.MessageID)
		if err != nil {
			return false, err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return false, err
		}
	} else {
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM messages WHERE id = ?`, f.MessageID).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
	}
	return true, insertParts(ctx, tx, f.MessageID, f.First, f.Parts)
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
	err = s.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `
			UPDATE messages SET content = ?, status = ?, input_tokens = ?, output_tokens = ?, error = ?,
				error_reason = ?, error_suggested_action = ?, sources = ?, number_checks = ?, updated_at = ?
			WHERE id = ?`,
			m.Content, m.Status, m.InputTokens, m.OutputTokens, m.Error, m.ErrorReason, m.ErrorSuggestedAction, sources, checks, ts(t), m.ID)
		if err != nil {
			return err
		}
		if err := mustAffect(res, "finish message", "message not found"); err != nil {
			return err
		}
		first, parts, replace := record.FinishParts(m)
		if replace {
			if _, err := tx.ExecContext(ctx, `DELETE FROM message_parts WHERE message_id = ?`, m.ID); err != nil {
				return err
			}
		}
		if err := insertParts(ctx, tx, m.ID, first, parts); err != nil {
			return err
		}
		if u == nil {
			return nil
		}
		_, err = tx.ExecContext(ctx, `
			INSERT INTO token_usage (id, user_id, conversation_id, message_id, provider, model,
				input_tokens, output_tokens, success, estimated, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (id) DO NOTHING`,
			u.ID, u.UserID, u.ConversationID, u.MessageID, u.Provider, u.Model,
			u.InputTokens, u.OutputTokens, boolInt(u.Success), boolInt(u.Estimated), ts(u.CreatedAt))
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
	return s.messages(ctx, conversationID, -1, true)
}

// RecentMessages returns the newest n messages of a conversation, oldest first,
// each with its tool calls.
func (s *Store) RecentMessages(ctx context.Context, conversationID string, n int) ([]*datachat.Message, error) {
	if n <= 0 {
		return []*datachat.Message{}, nil
	}
	return s.messages(ctx, conversationID, n, false)
}

// TurnStart reads what a turn starts from in one read transaction: the
// user's conversation, its pending confirmation (nil when none) and its
// newest n messages, as RecentMessages returns them.
func (s *Store) TurnStart(ctx context.Context, userID, conversationID string, n int) (*datachat.Conversation, *datachat.Confirmation, []*datachat.Message, error) {
	var (
		conv    *datachat.Conversation
		pending *datachat.Confirmation
		msgs    = []*datachat.Message{}
	)
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		var err error
		conv, err = decode.Conversation(tx.QueryRowContext(ctx,
			`SELECT `+record.ConversationColumns+` FROM conversations WHERE id = ? AND user_id = ?`, conversationID, userID))
		if err != nil {
			return notFoundIfNoRows(err, "get conversation", "conversation not found")
		}
		pending, err = decode.Confirmation(tx.QueryRowContext(ctx, `SELECT `+record.ConfirmationColumns+` FROM confirmations
			WHERE conversation_id = ? AND status = 'pending'
			ORDER BY created_at DESC, rowid DESC LIMIT 1`, conversationID))
		if errors.Is(err, sql.ErrNoRows) {
			pending, err = nil, nil
		}
		if err != nil || n <= 0 {
			return err
		}
		msgs, err = messagesIn(ctx, tx, conversationID, n, false)
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

// messages lists the newest limit messages (all when limit < 0) in order,
// with their sources if withSources is set.
func (s *Store) messages(ctx context.Context, conversationID string, limit int, withSources bool) ([]*datachat.Message, error) {
	var msgs []*datachat.Message
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		var err error
		msgs, err = messagesIn(ctx, tx, conversationID, limit, withSources)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list messages: %w", err)
	}
	return msgs, nil
}

// messagesIn is messages in tx.
func messagesIn(ctx context.Context, tx *sql.Tx, conversationID string, limit int, withSources bool) ([]*datachat.Message, error) {
	msgs := []*datachat.Message{}
	err := func() error {
		rows, err := tx.QueryContext(ctx, `
			SELECT id, conversation_id, role, content, status, input_tokens, output_tokens, error,
				error_reason, error_suggested_action, created_at, updated_at, CASE WHEN ? THEN sources END,
				CASE WHEN ? THEN number_checks END
			FROM messages WHERE rowid IN (SELECT rowid FROM messages WHERE conversation_id = ?
			      ORDER BY created_at DESC, rowid DESC LIMIT ?)
			ORDER BY created_at, rowid`, withSources, withSources, conversationID, limit)
		if err != nil {
			return err
		}
		list, err := collect(rows, decode.Message)
		if err != nil || len(list) == 0 {
			return err
		}
		msgs = list
		th := record.NewThread(msgs)
		rows, err = tx.QueryContext(ctx, `
			SELECT `+record.ToolCallColumns+`
			FROM tool_calls t JOIN messages m ON m.id = t.message_id
			WHERE m.conversation_id = ? AND m.created_at >= ? ORDER BY t.message_id, t.seq, t.rowid`,
			conversationID, ts(msgs[0].CreatedAt))
		if err != nil {
			return err
		}
		calls, err := collect(rows, decode.ToolCall)
		if err != nil {
			return err
		}
		for _, tc := range calls {
			th.AddToolCall(tc)
		}
		rows, err = tx.QueryContext(ctx, `
			SELECT p.message_id, p.kind, p.text, p.call_id
			FROM message_parts p JOIN messages m ON m.id = p.message_id
			WHERE m.conversation_id = ? AND m.created_at >= ? ORDER BY p.message_id, p.seq`,
			conversationID, ts(msgs[0].CreatedAt))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			var p datachat.Part
			if err := rows.Scan(&id, &p.Type, &p.Text, &p.CallID); err != nil {
				return err
			}
			th.AddPart(id, p)
		}
		msgs = th.Messages()
		return rows.Err()
	}()
	return msgs, err
}

// BeginTurn stores a turn's user message (if any) and its streaming assistant
// message, leased to lease, in one transaction; ECONFLICT, storing nothing, if
// the conversation has a streaming message whose lease is live at now, after
// marking those whose lease lapsed interrupted. The transaction begins
// IMMEDIATE, so it is serialised with every other writer of the file, in this
// process and in others. ENOTFOUND if the conversation does not exist.
func (s *Store) BeginTurn(ctx context.Context, user, assistant *datachat.Message, lease datachat.Lease, at time.Time) error {
	turn := record.Turn(user, assistant, lease)
	convID := assistant.ConversationID
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		leases, err := streamingLeases(ctx, tx, convID)
		if err != nil {
			return err
		}
		interrupt, err := datachat.AdmitTurn(leases, record.Time(at))
		if err != nil {
			return err
		}
		if interrupt {
			if _, err := tx.ExecContext(ctx, `UPDATE messages SET status = ?, updated_at = ?, content = `+partsText+`
				WHERE conversation_id = ? AND status = ?`,
				datachat.StatusInterrupted, ts(record.Now()), convID, datachat.StatusStreaming); err != nil {
				return err
			}
		}
		for _, m := range turn {
			if _, err := tx.ExecContext(ctx, `
				INSERT INTO messages (id, conversation_id, role, content, status, input_tokens, output_tokens, error,
					created_at, updated_at, lease_owner, lease_node, lease_until)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				m.ID, m.ConversationID, m.Role, m.Content, m.Status, m.InputTokens, m.OutputTokens, m.Error,
				ts(m.CreatedAt), ts(m.UpdatedAt), m.Lease.Owner, m.Lease.Node, tsPtr(m.Until)); err != nil {
				return err
			}
		}
		_, err = tx.ExecContext(ctx, `UPDATE conversations SET updated_at = MAX(updated_at, ?) WHERE id = ?`,
			ts(assistant.CreatedAt), convID)
		return err
	})
	if datachat.ErrorCode(err) == datachat.ECONFLICT {
		return err
	}
	return writeError(err, "begin turn", "conversation not found", "message already exists")
}

// streamingLeases returns the leases of a conversation's streaming messages,
// a zero Until for one stored without a lease.
func streamingLeases(ctx context.Context, tx *sql.Tx, convID string) ([]datachat.Lease, error) {
	rows, err := tx.QueryContext(ctx, `
		SELECT lease_owner, lease_node, lease_until FROM messages WHERE conversation_id = ? AND status = ?`,
		convID, datachat.StatusStreaming)
	if err != nil {
		return nil, err
	}
	return collect(rows, decode.Lease)
}

// RenewLease sets a message's lease; ENOTFOUND if there is no such message.
func (s *Store) RenewLease(ctx context.Context, messageID string, lease datachat.Lease) error {
	res, err := s.write.ExecContext(ctx,
		`UPDATE messages SET lease_owner = ?, lease_node = ?, lease_until = ? WHERE id = ?`,
		lease.Owner, lease.Node, ts(lease.Until), messageID)
	if err != nil {
		return fmt.Errorf("renew lease: %w", err)
	}
	return mustAffect(res, "renew lease", "message not found")
}

// partsText is an interrupted message's content: the text of the parts it
// streamed, or what it had when nothing was appended.
const partsText = `COALESCE((SELECT group_concat(p.text, '' ORDER BY p.seq) FROM message_parts p
	WHERE p.message_id = messages.id AND p.kind = 'text'), messages.content)`

// InterruptStreaming marks as interrupted the streaming messages whose writer
// is gone (lease lapsed before now or none; leased on node by another owner),
// never those leased to owner, and returns how many there were.
func (s *Store) InterruptStreaming(ctx context.Context, at time.Time, owner, node string) (int, error) {
	res, err := s.write.ExecContext(ctx, `
		UPDATE messages SET status = ?, updated_at = ?, content = `+partsText+`
		WHERE status = ? AND (? = '' OR lease_owner <> ?)
			AND (lease_until IS NULL OR lease_until <= ? OR (? <> '' AND lease_node = ?))`,
		datachat.StatusInterrupted, ts(record.Now()), datachat.StatusStreaming, owner, owner, ts(at), node, node)
	if err != nil {
		return 0, fmt.Errorf("interrupt streaming messages: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("interrupt streaming messages: %w", err)
	}
	return int(n), nil
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
	_, err = s.write.ExecContext(ctx, `
		INSERT INTO tool_calls (id, message_id, seq, call_id, tool, args, ok, result, error, started_at, duration_ms, columns)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		tc.ID, tc.MessageID, tc.Seq, tc.CallID, tc.Tool, record.RawJSON(tc.Args), boolInt(tc.OK), tc.Result, tc.Error,
		ts(tc.StartedAt), tc.DurationMS, cols)
	return writeError(err, "create tool call", "message not found", "tool call already exists")
}
