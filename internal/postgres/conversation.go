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

// BeginTurn stores a turn's user message (if any) and its streaming assistant
// message, leased to lease, in one transaction; ECONFLICT, storing nothing, if
// the conversation has a streaming message whose lease is live at now, after
// marking those whose lease lapsed interrupted. The transaction first locks
// the conversation's row, so BeginTurns of one conversation are serialised
// across every process sharing the database. ENOTFOUND if the conversation
// does not exist.
func (s *Store) BeginTurn(ctx context.Context, user, assistant *datachat.Message, lease datachat.Lease, at time.Time) error {
	turn := record.Turn(user, assistant, lease)
	convID := assistant.ConversationID
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var id string
		if err := tx.QueryRow(ctx, `SELECT id FROM conversations WHERE id = $1 FOR UPDATE`, convID).Scan(&id); err != nil {
			return notFoundIfNoRows(err, "lock conversation", "conversation not found")
		}
		leases, err := streamingLeases(ctx, tx, convID)
		if err != nil {
			return err
		}
		interrupt, err := datachat.AdmitTurn(leases, record.Time(at))
		if err != nil {
			return err
		}
		if interrupt {
			if _, err := tx.Exec(ctx, `UPDATE messages SET status = $1, updated_at = $2, content = `+partsText+`
				WHERE conversation_id = $3 AND status = $4`,
				datachat.StatusInterrupted, record.Now(), convID, datachat.StatusStreaming); err != nil {
				return err
			}
		}
		for _, m := range turn {
			if _, err := tx.Exec(ctx, `
				INSERT INTO messages (id, conversation_id, role, content, status, input_tokens, output_tokens, error,
					created_at, updated_at, lease_owner, lease_node, lease_until)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
				m.ID, m.ConversationID, m.Role, m.Content, m.Status, m.InputTokens, m.OutputTokens, m.Error,
				m.CreatedAt, m.UpdatedAt, m.Lease.Owner, m.Lease.Node, m.Until); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, `UPDATE conversations SET updated_at = GREATEST(updated_at, $1) WHERE id = $2`,
			assistant.CreatedAt, convID)
		return err
	})
	if datachat.ErrorCode(err) == datachat.ECONFLICT || datachat.ErrorCode(err) == datachat.ENOTFOUND {
		return err
	}
	return writeError(err, "begin turn", "", "message already exists")
}

// streamingLeases returns the leases of a conversation's streaming messages,
// a zero Until for one stored without a lease.
func streamingLeases(ctx context.Context, tx pgx.Tx, convID string) ([]datachat.Lease, error) {
	rows, err := tx.Query(ctx, `
		SELECT lease_owner, lease_node, lease_until FROM messages WHERE conversation_id = $1 AND status = $2`,
		convID, datachat.StatusStreaming)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, rowTo(decode.Lease))
}

// partsText is an interrupted message's content: the text of the parts it
// streamed, or what it had when nothing was appended.
const partsText = `COALESCE((SELECT string_agg(p.text, '' ORDER BY p.seq) FROM message_parts p
	WHERE p.message_id = messages.id AND p.kind = 'text'), messages.content)`

// InterruptStreaming marks as interrupted the streaming messages whose writer
// is gone (lease lapsed before now or none; leased on node by another owner),
// never those leased to owner, and returns how many there were.
func (s *Store) InterruptStreaming(ctx context.Context, at time.Time, owner, node string) (int, error) {
	tag, err := s.pool.Exec(ctx, `
		UPDATE messages SET status = $1, updated_at = $2, content = `+partsText+`
		WHERE status = $3 AND ($4 = '' OR lease_owner <> $4)
			AND (lease_until IS NULL OR lease_until <= $5 OR ($6 <> '' AND lease_node = $6))`,
		datachat.StatusInterrupted, record.Now(), datachat.StatusStreaming, owner, record.Time(at), node)
	if err != nil {
		return 0, fmt.Errorf("interrupt streaming messages: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
