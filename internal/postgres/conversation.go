package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"datachat"
	"datachat/internal/record"
	"datachat/internal/sqlstore"
)

// insertParts inserts parts in one statement, of arrays.
func insertParts(ctx context.Context, tx sqlstore.DB, messageID string, first int, parts []datachat.Part) error {
	if len(parts) == 0 {
		return nil
	}
	seqs := make([]int32, len(parts))
	kinds := make([]string, len(parts))
	texts := make([]string, len(parts))
	calls := make([]string, len(parts))
	for i, p := range parts {
		seqs[i], kinds[i], texts[i], calls[i] = int32(first+i), p.Type, p.Text, p.CallID
	}
	_, err := tx.Exec(ctx, `
		INSERT INTO message_parts (message_id, seq, kind, text, call_id)
		SELECT ?, * FROM unnest(?::integer[], ?::text[], ?::text[], ?::text[])
		ON CONFLICT (message_id, seq) DO NOTHING`,
		messageID, seqs, kinds, texts, calls)
	return err
}

// FlushStreaming writes the new parts and leases of many streaming messages
// in one transaction of three statements, skipping (and returning) those that
// no longer exist. The messages are locked first (FOR KEY SHARE, in id order),
// so that one deleted meanwhile is either seen gone or deleted only after the
// commit, never failing the parts' foreign key.
func (s *Store) FlushStreaming(ctx context.Context, batch []datachat.StreamingFlush) ([]string, error) {
	var ids []string
	for _, f := range batch {
		if f.Lease != nil || len(f.Parts) > 0 {
			ids = append(ids, f.MessageID)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	var gone []string
	err := s.tx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT id FROM messages WHERE id = ANY($1) ORDER BY id FOR KEY SHARE`, ids)
		if err != nil {
			return err
		}
		found, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		live := make(map[string]bool, len(found))
		for _, id := range found {
			live[id] = true
		}
		gone = nil
		var (
			leaseIDs, owners, nodes []string
			untils                  []time.Time
			partIDs, kinds, texts   []string
			calls                   []string
			seqs                    []int32
		)
		for _, f := range batch {
			if f.Lease == nil && len(f.Parts) == 0 {
				continue
			}
			if !live[f.MessageID] {
				gone = append(gone, f.MessageID)
				continue
			}
			if l := f.Lease; l != nil {
				leaseIDs, owners, nodes = append(leaseIDs, f.MessageID), append(owners, l.Owner), append(nodes, l.Node)
				untils = append(untils, record.Time(l.Until))
			}
			for i, p := range f.Parts {
				partIDs, seqs = append(partIDs, f.MessageID), append(seqs, int32(f.First+i))
				kinds, texts, calls = append(kinds, p.Type), append(texts, p.Text), append(calls, p.CallID)
			}
		}
		if len(leaseIDs) > 0 {
			if _, err := tx.Exec(ctx, `
				UPDATE messages m SET lease_owner = l.owner, lease_node = l.node, lease_until = l.until
				FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[]) AS l (id, owner, node, until)
				WHERE m.id = l.id`,
				leaseIDs, owners, nodes, untils); err != nil {
				return err
			}
		}
		if len(partIDs) > 0 {
			if _, err := tx.Exec(ctx, `
				INSERT INTO message_parts (message_id, seq, kind, text, call_id)
				SELECT * FROM unnest($1::text[], $2::integer[], $3::text[], $4::text[], $5::text[])
				ON CONFLICT (message_id, seq) DO NOTHING`,
				partIDs, seqs, kinds, texts, calls); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("flush streaming messages: %w", err)
	}
	return gone, nil
}
