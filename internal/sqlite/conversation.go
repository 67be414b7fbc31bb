package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"datachat"
	"datachat/internal/record"
	"datachat/internal/sqlstore"
)

// insertParts inserts parts one statement each, kept prepared.
func insertParts(ctx context.Context, tx sqlstore.DB, messageID string, first int, parts []datachat.Part) error {
	for i, p := range parts {
		if _, err := tx.Exec(ctx, `
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
	return true, insertParts(ctx, sqlDB{tx}, f.MessageID, f.First, f.Parts)
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
	return sqlstore.Collect(sqlRows{rows}, decode.Lease)
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
