package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"datachat"
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
	err := s.writeTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
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
	return true, insertParts(ctx, sqlDB{q: tx}, f.MessageID, f.First, f.Parts)
}
