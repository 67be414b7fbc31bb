package sqlstore

import (
	"context"
	"fmt"
	"time"

	"datachat"
	"datachat/internal/record"
)

// BeginTurn stores a turn's user message (if any) and its streaming assistant
// message, leased to lease, in one transaction; ECONFLICT, storing nothing, if
// the conversation has a streaming message whose lease is live at now, after
// marking those whose lease lapsed interrupted. BeginTurns of one
// conversation run one at a time across every process sharing the database:
// the write transaction holds [Dialect.LockConversation]. ENOTFOUND if the
// conversation does not exist.
func (s *Store) BeginTurn(ctx context.Context, user, assistant *datachat.Message, lease datachat.Lease, at time.Time) error {
	turn := record.Turn(user, assistant, lease)
	convID := assistant.ConversationID
	err := s.writeTx(ctx, func(tx DB) error {
		if s.d.LockConversation != nil {
			if err := s.d.LockConversation(ctx, tx, convID); err != nil {
				return err
			}
		}
		rows, err := tx.Query(ctx, `
			SELECT lease_owner, lease_node, lease_until FROM messages WHERE conversation_id = ? AND status = ?`,
			convID, datachat.StatusStreaming)
		if err != nil {
			return err
		}
		leases, err := Collect(rows, s.d.Decode.Lease)
		if err != nil {
			return err
		}
		interrupt, err := datachat.AdmitTurn(leases, record.Time(at))
		if err != nil {
			return err
		}
		if interrupt {
			if _, err := tx.Exec(ctx, `UPDATE messages SET status = ?, updated_at = ?, content = `+PartsText(s.d)+`
				WHERE conversation_id = ? AND status = ?`,
				datachat.StatusInterrupted, s.d.Time(record.Now()), convID, datachat.StatusStreaming); err != nil {
				return err
			}
		}
		for _, m := range turn {
			if _, err := tx.Exec(ctx, `
				INSERT INTO messages (id, conversation_id, role, content, status, input_tokens, output_tokens, error,
					created_at, updated_at, lease_owner, lease_node, lease_until)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				m.ID, m.ConversationID, m.Role, m.Content, m.Status, m.InputTokens, m.OutputTokens, m.Error,
				s.d.Time(m.CreatedAt), s.d.Time(m.UpdatedAt), m.Lease.Owner, m.Lease.Node, s.d.NullTime(m.Until)); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, `UPDATE conversations SET updated_at = `+s.d.Greatest+`(updated_at, ?) WHERE id = ?`,
			s.d.Time(assistant.CreatedAt), convID)
		return err
	})
	if c := datachat.ErrorCode(err); c == datachat.ECONFLICT || c == datachat.ENOTFOUND {
		return err
	}
	return s.writeError(err, "begin turn", "conversation not found", "message already exists")
}

// PartsText is, in d's SQL, an interrupted message's content: the text of
// the parts it streamed, or what it had when nothing was appended.
func PartsText(d Dialect) string {
	return `COALESCE((SELECT ` + d.StringAgg + `(p.text, '' ORDER BY p.seq) FROM message_parts p
	WHERE p.message_id = messages.id AND p.kind = 'text'), messages.content)`
}

// InterruptStreaming marks as interrupted the streaming messages whose writer
// is gone (lease lapsed before now or none; leased on node by another owner),
// never those leased to owner, and returns how many there were.
func (s *Store) InterruptStreaming(ctx context.Context, at time.Time, owner, node string) (int, error) {
	n, err := s.write.Exec(ctx, `
		UPDATE messages SET status = ?, updated_at = ?, content = `+PartsText(s.d)+`
		WHERE status = ? AND (? = '' OR lease_owner <> ?)
			AND (lease_until IS NULL OR lease_until <= ? OR (? <> '' AND lease_node = ?))`,
		datachat.StatusInterrupted, s.d.Time(record.Now()), datachat.StatusStreaming, owner, owner, s.d.Time(at), node, node)
	if err != nil {
		return 0, fmt.Errorf("interrupt streaming messages: %w", err)
	}
	return int(n), nil
}
