package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"slices"

	"datachat"
	"datachat/internal/record"
	"datachat/internal/sqlstore"
)

// shareFrom is the FROM of a listing of shares: each with the user it names.
const shareFrom = ` FROM shares s LEFT JOIN users u ON u.id = s.user_id `

// sharedWith is the condition that conversation c, of owner o, is shared
// with the viewer (the first two parameters: the viewer's id twice): by a
// share naming them or one for everyone; never their own, nor one of a
// disabled owner.
const sharedWith = `c.user_id <> ?1 AND o.disabled_at IS NULL AND EXISTS (SELECT 1 FROM shares s
	WHERE s.conversation_id = c.id AND (s.user_id = ?1 OR s.everyone = 1))`

// sharedAt is when conversation c was first shared with the viewer (?1).
const sharedAt = `(SELECT MIN(s.created_at) FROM shares s WHERE s.conversation_id = c.id AND (s.user_id = ?1 OR s.everyone = 1))`

// ownConversation returns ENOTFOUND unless the conversation is the owner's.
func ownConversation(ctx context.Context, q queryer, ownerID, conversationID string) error {
	var one int
	err := q.QueryRowContext(ctx, `SELECT 1 FROM conversations WHERE id = ? AND user_id = ?`, conversationID, ownerID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return record.ErrConversationNotFound
	}
	return err
}

// CreateShares shares the owner's conversation with the users named and,
// when everyone is set, with everyone, in one transaction.
func (s *Store) CreateShares(ctx context.Context, ownerID, conversationID string, users []string, everyone bool) (shares, created []*datachat.Share, err error) {
	names, err := datachat.CheckShareUsers(users, everyone)
	if err != nil {
		return nil, nil, err
	}
	err = s.writeTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		shares, created = nil, nil
		if err := ownConversation(ctx, tx, ownerID, conversationID); err != nil {
			return err
		}
		ids, err := userIDs(ctx, tx, record.ShareLookups(names))
		if err != nil {
			return err
		}
		if err := record.ShareTargets(names, ids, ownerID); err != nil {
			return err
		}
		add := func(userID any, all bool) error {
			sh := &datachat.Share{ID: record.NewID(), CreatedAt: record.Now()}
			res, err := tx.ExecContext(ctx, `INSERT INTO shares (id, conversation_id, user_id, everyone, created_at)
				VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
				sh.ID, conversationID, userID, boolInt(all), ts(sh.CreatedAt))
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			found, err := decode.Share(tx.QueryRowContext(ctx, `SELECT `+record.ShareColumns+shareFrom+`
				WHERE s.conversation_id = ? AND (s.user_id = ? OR (? AND s.everyone = 1))`, conversationID, userID, all))
			if err != nil {
				return err
			}
			shares = append(shares, found)
			if n == 1 {
				created = append(created, found)
			}
			return nil
		}
		if everyone {
			if err := add(nil, true); err != nil {
				return err
			}
		}
		for _, n := range names {
			if err := add(ids[n], false); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, record.Wrap("create shares", err)
	}
	return shares, created, nil
}

// userIDs returns the ids of the users named, by name; a name no user has
// is not in it.
func userIDs(ctx context.Context, q queryer, names []string) (map[string]string, error) {
	ids := make(map[string]string, len(names))
	if len(names) == 0 {
		return ids, nil
	}
	list, err := json.Marshal(names)
	if err != nil {
		return nil, err
	}
	rows, err := q.QueryContext(ctx, `SELECT u.id, u.name FROM json_each(?) j JOIN users u ON u.name = j.value`, string(list))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id, name string
		if err := rows.Scan(&id, &name); err != nil {
			return nil, err
		}
		ids[name] = id
	}
	return ids, rows.Err()
}

// Shares lists the shares of the owner's conversation, oldest first.
func (s *Store) Shares(ctx context.Context, ownerID, conversationID string) ([]*datachat.Share, error) {
	var list []*datachat.Share
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		if err := ownConversation(ctx, tx, ownerID, conversationID); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `SELECT `+record.ShareColumns+shareFrom+`
			WHERE s.conversation_id = ? ORDER BY s.created_at, s.rowid`, conversationID)
		if err != nil {
			return err
		}
		list, err = sqlstore.Collect(sqlRows{rows}, decode.Share)
		return err
	})
	if err != nil {
		return nil, record.Wrap("list shares", err)
	}
	return list, nil
}

// DeleteShare revokes a share of the owner's conversation and returns it.
func (s *Store) DeleteShare(ctx context.Context, ownerID, conversationID, shareID string) (*datachat.Share, error) {
	var sh *datachat.Share
	err := s.writeTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var err error
		sh, err = decode.Share(tx.QueryRowContext(ctx, `SELECT `+record.ShareColumns+shareFrom+`
			JOIN conversations c ON c.id = s.conversation_id
			WHERE s.id = ? AND s.conversation_id = ? AND c.user_id = ?`, shareID, conversationID, ownerID))
		if errors.Is(err, sql.ErrNoRows) {
			if err := ownConversation(ctx, tx, ownerID, conversationID); err != nil {
				return err
			}
			return record.ErrShareNotFound
		}
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM shares WHERE id = ?`, shareID)
		return err
	})
	if err != nil {
		return nil, record.Wrap("delete share", err)
	}
	return sh, nil
}

// SharedConversation returns a conversation shared with the viewer.
func (s *Store) SharedConversation(ctx context.Context, viewerID, conversationID string) (*datachat.SharedConversation, error) {
	c, err := decode.SharedConversation(s.read.QueryRowContext(ctx, `SELECT `+record.SharedColumns+`, `+sharedAt+`
		FROM conversations c JOIN users o ON o.id = c.user_id
		WHERE c.id = ?2 AND `+sharedWith, viewerID, conversationID))
	if err != nil {
		return nil, notFoundIfNoRows(err, "get shared conversation", record.ErrConversationNotFound.Message)
	}
	return c, nil
}

// SharedWithMe lists the conversations shared with the viewer, most
// recently shared first.
func (s *Store) SharedWithMe(ctx context.Context, viewerID string) ([]*datachat.SharedConversation, error) {
	return sqlstore.QueryAll(ctx, sqlDB{q: s.read}, decode.SharedConversation, "list shared conversations", `
		SELECT `+record.SharedColumns+`, `+sharedAt+` AS shared_at
		FROM conversations c JOIN users o ON o.id = c.user_id
		WHERE c.id IN (SELECT conversation_id FROM shares WHERE user_id = ?1
			UNION SELECT conversation_id FROM shares WHERE everyone = 1) AND `+sharedWith+`
		ORDER BY shared_at DESC, c.id DESC`, viewerID)
}

// CopyShared copies a conversation shared with the viewer into a new one of
// theirs, in one transaction.
func (s *Store) CopyShared(ctx context.Context, cp datachat.ShareCopy) (*datachat.ShareCopied, error) {
	if cp.Title == "" {
		return nil, datachat.Errorf(datachat.EINVALID, "a copy needs a title")
	}
	var out *datachat.ShareCopied
	err := s.writeTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM conversations c JOIN users o ON o.id = c.user_id
			WHERE c.id = ?2 AND `+sharedWith, cp.ViewerID, cp.ConversationID).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return record.ErrConversationNotFound
		}
		if err != nil {
			return err
		}
		out, err = copyShared(ctx, tx, cp)
		return err
	})
	if err != nil {
		return nil, record.Wrap("copy shared conversation", err)
	}
	return out, nil
}

// copyShared makes cp's copy in tx, once the share is checked.
func copyShared(ctx context.Context, tx *sql.Tx, cp datachat.ShareCopy) (*datachat.ShareCopied, error) {
	from := cp.ConversationID
	now := record.Now()
	out := &datachat.ShareCopied{Datasets: map[string]*datachat.Dataset{}, Documents: map[string]*datachat.Document{}}
	var err error
	out.Conversation, err = decode.Conversation(tx.QueryRowContext(ctx, `
		INSERT INTO conversations (id, user_id, title, created_at, updated_at, notes)
		SELECT ?, ?, ?, ?, ?, notes FROM conversations WHERE id = ?
		RETURNING `+record.ConversationColumns,
		record.NewID(), cp.ViewerID, cp.Title, ts(now), ts(now), from))
	if err != nil {
		return nil, writeError(err, "copy conversation", record.ErrNoUser.Message, "")
	}
	to := out.Conversation.ID

	// Messages in their order, then their parts and tool calls: each kind
	// of row in one statement, the copies' ids made here and paired with
	// those of the rows they copy (json_each of [old, new…] keeps the order).
	msgs, err := ids(ctx, tx, `SELECT id FROM messages WHERE conversation_id = ? ORDER BY created_at, rowid`, from)
	if err != nil {
		return nil, err
	}
	newMsg := make(map[string]string, len(msgs))
	msgPairs := make([][]string, len(msgs))
	for i, old := range msgs {
		newMsg[old] = record.NewID()
		msgPairs[i] = []string{old, newMsg[old]}
	}
	if _, err := tx.ExecContext(ctx, `
		INSERT INTO messages (id, conversation_id, role, content, status, input_tokens, output_tokens, error,
			error_reason, error_suggested_action, sources, number_checks, created_at, updated_at)
		SELECT j.value ->> 1, ?, role, CASE WHEN status = ? THEN `+sqlstore.PartsText(dialect)+` ELSE content END,
			CASE WHEN status IN (?, ?) THEN ? ELSE status END, input_tokens, output_tokens, error,
			error_reason, error_suggested_action, sources, number_checks, created_at, updated_at
		FROM json_each(?) j JOIN messages ON messages.id = j.value ->> 0
		ORDER BY j.key`,
		to, datachat.StatusStreaming, datachat.StatusStreaming, datachat.StatusAwaitingConfirmation, datachat.StatusInterrupted,
		jsonList(msgPairs)); err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO message_parts (message_id, seq, kind, text, call_id)
		SELECT j.value ->> 1, p.seq, p.kind, p.text, p.call_id
		FROM json_each(?) j JOIN message_parts p ON p.message_id = j.value ->> 0`, jsonList(msgPairs)); err != nil {
		return nil, err
	}
	var calls [][]string // old id, new id, new message id
	rows, err := tx.QueryContext(ctx, `SELECT t.id, t.message_id FROM tool_calls t JOIN messages m ON m.id = t.message_id
		WHERE m.conversation_id = ? ORDER BY m.created_at, m.rowid, t.seq, t.rowid`, from)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var id, msg string
		if err := rows.Scan(&id, &msg); err != nil {
			rows.Close()
			return nil, err
		}
		if to, ok := newMsg[msg]; ok {
			calls = append(calls, []string{id, record.NewID(), to})
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, `
		INSERT INTO tool_calls (id, message_id, seq, call_id, tool, args, ok, result, error, started_at, duration_ms, columns)
		SELECT j.value ->> 1, j.value ->> 2, t.seq, t.call_id, t.tool, t.args, t.ok, t.result, t.error, t.started_at, t.duration_ms, t.columns
		FROM json_each(?) j JOIN tool_calls t ON t.id = j.value ->> 0
		ORDER BY j.key`, jsonList(calls)); err != nil {
		return nil, err
	}

	// Datasets, each reading its own copy of the file.
	datasets, err := ids(ctx, tx, `SELECT id FROM datasets WHERE conversation_id = ? ORDER BY created_at, rowid`, from)
	if err != nil {
		return nil, err
	}
	for _, old := range datasets {
		path, ok := cp.Datasets[old]
		if !ok {
			continue
		}
		d, err := decode.Dataset(tx.QueryRowContext(ctx, `
			INSERT INTO datasets (id, conversation_id, name, source, format, path, columns, row_count, bytes, created_at,
				description, column_descriptions)
			SELECT ?, ?, name, source, format, ?, columns, row_count, bytes, created_at, description, column_descriptions
			FROM datasets WHERE id = ?
			RETURNING `+record.DatasetColumns, record.NewID(), to, path, old))
		if err != nil {
			return nil, err
		}
		out.Datasets[old] = d
	}

	// Documents with their chunks.
	docs, err := ids(ctx, tx, `SELECT id FROM documents WHERE conversation_id = ? ORDER BY created_at, rowid`, from)
	if err != nil {
		return nil, err
	}
	want := make(map[string]bool, len(cp.Documents))
	for _, id := range cp.Documents {
		want[id] = true
	}
	for _, old := range docs {
		if !want[old] {
			continue
		}
		d, err := decode.Document(tx.QueryRowContext(ctx, `
			INSERT INTO documents (id, conversation_id, name, media_type, pages, chunks, bytes, metadata, created_at)
			SELECT ?, ?, name, media_type, pages, chunks, bytes, metadata, created_at FROM documents WHERE id = ?
			RETURNING `+record.DocumentColumns, record.NewID(), to, old))
		if err != nil {
			return nil, err
		}
		chunks, err := ids(ctx, tx, `SELECT id FROM chunks WHERE document_id = ? ORDER BY seq, rowid`, old)
		if err != nil {
			return nil, err
		}
		pairs := make([][]string, len(chunks))
		for i, c := range chunks {
			pairs[i] = []string{c, record.NewID()}
		}
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO chunks (id, document_id, seq, page, heading, start_pos, end_pos, text)
			SELECT j.value ->> 1, ?, c.seq, c.page, c.heading, c.start_pos, c.end_pos, c.text
			FROM json_each(?) j JOIN chunks c ON c.id = j.value ->> 0
			ORDER BY j.key`, d.ID, jsonList(pairs)); err != nil {
			return nil, err
		}
		out.Documents[old] = d
	}

	// The sources asked for that the conversation has attached, in the
	// order they were attached.
	sources, err := ids(ctx, tx, `SELECT source_name FROM conversation_db_sources WHERE conversation_id = ?
		ORDER BY created_at, rowid`, from)
	if err != nil {
		return nil, err
	}
	for _, name := range sources {
		if !slices.Contains(cp.Sources, name) {
			continue
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO conversation_db_sources (conversation_id, source_name, created_at)
			VALUES (?, ?, ?)`, to, name, ts(now)); err != nil {
			return nil, err
		}
	}

	// The dictionary's semantic layer, for the datasets and sources copied.
	var stored string
	err = tx.QueryRowContext(ctx, `SELECT layer FROM semantic_layers WHERE conversation_id = ?`, from).Scan(&stored)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, err
	}
	layer, err := record.CopyLayer(stored, out.Datasets, cp.Sources)
	if err != nil {
		return nil, err
	}
	if layer != "" {
		if _, err := tx.ExecContext(ctx, `INSERT INTO semantic_layers (conversation_id, layer) VALUES (?, ?)`, to, layer); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ids returns the first column of a query's rows.
func ids(ctx context.Context, tx *sql.Tx, query string, args ...any) ([]string, error) {
	return sqlstore.QueryAll(ctx, sqlDB{q: tx}, func(r record.Scanner) (id string, err error) {
		err = r.Scan(&id)
		return id, err
	}, "copy", query, args...)
}

// jsonList binds a list of id tuples as a JSON array, for json_each.
func jsonList(list [][]string) string {
	if len(list) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(list) // strings only: cannot fail
	return string(b)
}
