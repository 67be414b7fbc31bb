package postgres

import (
	"context"
	"errors"
	"slices"

	"github.com/jackc/pgx/v5"

	"datachat"
	"datachat/internal/record"
	"datachat/internal/sqlstore"
)

// shareFrom is the FROM of a listing of shares: each with the user it names.
const shareFrom = ` FROM shares s LEFT JOIN users u ON u.id = s.user_id `

// sharedWith is the condition that conversation c, of owner o, is shared
// with the viewer ($1): by a share naming them or one for everyone; never
// their own, nor one of a disabled owner.
const sharedWith = `c.user_id <> $1 AND o.disabled_at IS NULL AND EXISTS (SELECT 1 FROM shares s
	WHERE s.conversation_id = c.id AND (s.user_id = $1 OR s.everyone))`

// sharedAt is when conversation c was first shared with the viewer ($1).
const sharedAt = `(SELECT min(s.created_at) FROM shares s WHERE s.conversation_id = c.id AND (s.user_id = $1 OR s.everyone))`

// ownConversation returns ENOTFOUND unless the conversation is the owner's;
// lock, when not empty, locks its row until the transaction ends.
func ownConversation(ctx context.Context, tx pgx.Tx, ownerID, conversationID, lock string) error {
	var ok bool
	err := tx.QueryRow(ctx, `SELECT true FROM conversations WHERE id = $1 AND user_id = $2 `+lock, conversationID, ownerID).Scan(&ok)
	if errors.Is(err, pgx.ErrNoRows) {
		return record.ErrConversationNotFound
	}
	return err
}

// CreateShares shares the owner's conversation with the users named and,
// when everyone is set, with everyone, in one transaction. The conversation
// and the users named are locked against deletion until it commits.
func (s *Store) CreateShares(ctx context.Context, ownerID, conversationID string, users []string, everyone bool) (shares, created []*datachat.Share, err error) {
	names, err := datachat.CheckShareUsers(users, everyone)
	if err != nil {
		return nil, nil, err
	}
	err = s.tx(ctx, func(tx pgx.Tx) error {
		shares, created = nil, nil
		if err := ownConversation(ctx, tx, ownerID, conversationID, "FOR KEY SHARE"); err != nil {
			return err
		}
		ids := map[string]string{}
		rows, err := tx.Query(ctx, `SELECT id, name FROM users WHERE name = ANY($1) FOR KEY SHARE`, record.ShareLookups(names))
		if err != nil {
			return err
		}
		var id, name string
		if _, err := pgx.ForEachRow(rows, []any{&id, &name}, func() error { ids[name] = id; return nil }); err != nil {
			return err
		}
		if err := record.ShareTargets(names, ids, ownerID); err != nil {
			return err
		}
		add := func(userID *string) error {
			sh := &datachat.Share{ID: record.NewID(), CreatedAt: record.Now()}
			tag, err := tx.Exec(ctx, `INSERT INTO shares (id, conversation_id, user_id, everyone, created_at)
				VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`,
				sh.ID, conversationID, userID, userID == nil, sh.CreatedAt)
			if err != nil {
				return err
			}
			found, err := decode.Share(tx.QueryRow(ctx, `SELECT `+record.ShareColumns+shareFrom+`
				WHERE s.conversation_id = $1 AND (s.user_id = $2 OR ($2 IS NULL AND s.everyone))`, conversationID, userID))
			if err != nil {
				return err
			}
			shares = append(shares, found)
			if tag.RowsAffected() == 1 {
				created = append(created, found)
			}
			return nil
		}
		if everyone {
			if err := add(nil); err != nil {
				return err
			}
		}
		for _, n := range names {
			id := ids[n]
			if err := add(&id); err != nil {
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

// Shares lists the shares of the owner's conversation, oldest first.
func (s *Store) Shares(ctx context.Context, ownerID, conversationID string) ([]*datachat.Share, error) {
	var list []*datachat.Share
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if err := ownConversation(ctx, tx, ownerID, conversationID, ""); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT `+record.ShareColumns+shareFrom+`
			WHERE s.conversation_id = $1 ORDER BY s.created_at, s.row_seq`, conversationID)
		if err != nil {
			return err
		}
		list, err = pgx.CollectRows(rows, rowTo(decode.Share))
		return err
	})
	if err != nil {
		return nil, record.Wrap("list shares", err)
	}
	return record.NonNil(list), nil
}

// DeleteShare revokes a share of the owner's conversation and returns it.
func (s *Store) DeleteShare(ctx context.Context, ownerID, conversationID, shareID string) (*datachat.Share, error) {
	var sh *datachat.Share
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if err := ownConversation(ctx, tx, ownerID, conversationID, ""); err != nil {
			return err
		}
		var err error
		sh, err = decode.Share(tx.QueryRow(ctx, `WITH gone AS (DELETE FROM shares WHERE id = $1 AND conversation_id = $2 RETURNING *)
			SELECT `+record.ShareColumns+` FROM gone s LEFT JOIN users u ON u.id = s.user_id`, shareID, conversationID))
		if errors.Is(err, pgx.ErrNoRows) {
			return record.ErrShareNotFound
		}
		return err
	})
	if err != nil {
		return nil, record.Wrap("delete share", err)
	}
	return sh, nil
}

// SharedConversation returns a conversation shared with the viewer.
func (s *Store) SharedConversation(ctx context.Context, viewerID, conversationID string) (*datachat.SharedConversation, error) {
	c, err := decode.SharedConversation(s.pool.QueryRow(ctx, `SELECT `+record.SharedColumns+`, `+sharedAt+`
		FROM conversations c JOIN users o ON o.id = c.user_id
		WHERE c.id = $2 AND `+sharedWith, viewerID, conversationID))
	if err != nil {
		return nil, sqlstore.NotFoundIfNoRows(err, "get shared conversation", record.ErrConversationNotFound.Message)
	}
	return c, nil
}

// SharedWithMe lists the conversations shared with the viewer, most
// recently shared first.
func (s *Store) SharedWithMe(ctx context.Context, viewerID string) ([]*datachat.SharedConversation, error) {
	return queryAll(ctx, s.pool, decode.SharedConversation, "list shared conversations", `
		SELECT `+record.SharedColumns+`, `+sharedAt+` AS shared_at
		FROM conversations c JOIN users o ON o.id = c.user_id
		WHERE c.id IN (SELECT conversation_id FROM shares WHERE user_id = $1
			UNION SELECT conversation_id FROM shares WHERE everyone) AND `+sharedWith+`
		ORDER BY shared_at DESC, c.id DESC`, viewerID)
}

// CopyShared copies a conversation shared with the viewer into a new one of
// theirs, in one transaction. The share is locked until it commits, and the
// conversation and its owner against deletion: a revocation or a deletion
// waits for the copy, or the copy finds it done.
func (s *Store) CopyShared(ctx context.Context, cp datachat.ShareCopy) (*datachat.ShareCopied, error) {
	if cp.Title == "" {
		return nil, datachat.Errorf(datachat.EINVALID, "a copy needs a title")
	}
	var out *datachat.ShareCopied
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var ok bool
		err := tx.QueryRow(ctx, `SELECT true FROM conversations c JOIN users o ON o.id = c.user_id
			JOIN shares sh ON sh.conversation_id = c.id AND (sh.user_id = $1 OR sh.everyone)
			WHERE c.id = $2 AND `+sharedWith+` LIMIT 1 FOR KEY SHARE OF c, o FOR SHARE OF sh`, cp.ViewerID, cp.ConversationID).Scan(&ok)
		if errors.Is(err, pgx.ErrNoRows) {
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

// copyShared makes cp's copy in tx, once the share is checked: each kind of
// row in one statement, the ids of the copies made here and paired with
// those of the rows they copy (unnest … WITH ORDINALITY keeps the order).
func copyShared(ctx context.Context, tx pgx.Tx, cp datachat.ShareCopy) (*datachat.ShareCopied, error) {
	from := cp.ConversationID
	now := record.Now()
	out := &datachat.ShareCopied{Datasets: map[string]*datachat.Dataset{}, Documents: map[string]*datachat.Document{}}
	var err error
	out.Conversation, err = decode.Conversation(tx.QueryRow(ctx, `
		INSERT INTO conversations (id, user_id, title, created_at, updated_at, notes)
		SELECT $1, $2, $3, $4, $4, notes FROM conversations WHERE id = $5
		RETURNING `+record.ConversationColumns,
		record.NewID(), cp.ViewerID, cp.Title, now, from))
	if err != nil {
		return nil, writeError(err, "copy conversation", record.ErrNoUser.Message, "")
	}
	to := out.Conversation.ID

	// Messages in their order, then their parts and tool calls.
	oldMsgs, err := firstColumn(ctx, tx, `SELECT id FROM messages WHERE conversation_id = $1 ORDER BY created_at, row_seq`, from)
	if err != nil {
		return nil, err
	}
	newMsgs := newIDs(len(oldMsgs))
	if _, err := tx.Exec(ctx, `
		INSERT INTO messages (id, conversation_id, role, content, status, input_tokens, output_tokens, error,
			error_reason, error_suggested_action, sources, number_checks, created_at, updated_at)
		SELECT map.new_id, $3, role, CASE WHEN status = $4 THEN `+sqlstore.PartsText(dialect)+` ELSE content END,
			CASE WHEN status IN ($4, $5) THEN $6 ELSE status END, input_tokens, output_tokens, error,
			error_reason, error_suggested_action, sources, number_checks, created_at, updated_at
		FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS map (old_id, new_id, n)
		JOIN messages ON messages.id = map.old_id
		ORDER BY map.n`,
		oldMsgs, newMsgs, to, datachat.StatusStreaming, datachat.StatusAwaitingConfirmation, datachat.StatusInterrupted); err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO message_parts (message_id, seq, kind, text, call_id)
		SELECT map.new_id, p.seq, p.kind, p.text, p.call_id
		FROM unnest($1::text[], $2::text[]) AS map (old_id, new_id) JOIN message_parts p ON p.message_id = map.old_id`,
		oldMsgs, newMsgs); err != nil {
		return nil, err
	}
	oldCalls, err := firstColumn(ctx, tx, `SELECT t.id FROM tool_calls t WHERE t.message_id = ANY($1)
		ORDER BY array_position($1, t.message_id), t.seq, t.row_seq`, oldMsgs)
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO tool_calls (id, message_id, seq, call_id, tool, args, ok, result, error, started_at, duration_ms, columns)
		SELECT calls.new_id, msgs.new_id, t.seq, t.call_id, t.tool, t.args, t.ok, t.result, t.error, t.started_at, t.duration_ms, t.columns
		FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS calls (old_id, new_id, n)
		JOIN tool_calls t ON t.id = calls.old_id
		JOIN unnest($3::text[], $4::text[]) AS msgs (old_id, new_id) ON msgs.old_id = t.message_id
		ORDER BY calls.n`,
		oldCalls, newIDs(len(oldCalls)), oldMsgs, newMsgs); err != nil {
		return nil, err
	}

	// Datasets, each reading its own copy of the file.
	datasets, err := firstColumn(ctx, tx, `SELECT id FROM datasets WHERE conversation_id = $1 ORDER BY created_at, row_seq`, from)
	if err != nil {
		return nil, err
	}
	var oldSets, paths []string
	for _, id := range datasets {
		if p, ok := cp.Datasets[id]; ok {
			oldSets, paths = append(oldSets, id), append(paths, p)
		}
	}
	rows, err := tx.Query(ctx, `
		INSERT INTO datasets (id, conversation_id, name, source, format, path, columns, row_count, bytes, created_at,
			description, column_descriptions)
		SELECT map.new_id, $4, d.name, d.source, d.format, map.path, d.columns, d.row_count, d.bytes, d.created_at,
			d.description, d.column_descriptions
		FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS map (old_id, new_id, path, n)
		JOIN datasets d ON d.id = map.old_id AND d.conversation_id = $5
		ORDER BY map.n
		RETURNING `+record.DatasetColumns, oldSets, newIDs(len(oldSets)), paths, to, from)
	if err != nil {
		return nil, err
	}
	sets, err := pgx.CollectRows(rows, rowTo(decode.Dataset))
	if err != nil {
		return nil, err
	}
	for _, d := range sets {
		out.Datasets[oldSets[slices.Index(paths, d.Path)]] = d
	}

	// Documents with their chunks (not yet searchable: the index makes
	// them so).
	docs, err := firstColumn(ctx, tx, `SELECT id FROM documents WHERE conversation_id = $1 AND id = ANY($2)
		ORDER BY created_at, row_seq`, from, record.NonNil(cp.Documents))
	if err != nil {
		return nil, err
	}
	newDocs := newIDs(len(docs))
	rows, err = tx.Query(ctx, `
		INSERT INTO documents (id, conversation_id, name, media_type, pages, chunks, bytes, metadata, created_at)
		SELECT map.new_id, $3, d.name, d.media_type, d.pages, d.chunks, d.bytes, d.metadata, d.created_at
		FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS map (old_id, new_id, n) JOIN documents d ON d.id = map.old_id
		ORDER BY map.n
		RETURNING `+record.DocumentColumns, docs, newDocs, to)
	if err != nil {
		return nil, err
	}
	copied, err := pgx.CollectRows(rows, rowTo(decode.Document))
	if err != nil {
		return nil, err
	}
	for _, d := range copied {
		out.Documents[docs[slices.Index(newDocs, d.ID)]] = d
	}
	oldChunks, err := firstColumn(ctx, tx, `SELECT id FROM chunks WHERE document_id = ANY($1)
		ORDER BY array_position($1, document_id), seq, row_seq`, docs)
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO chunks (id, document_id, seq, page, heading, start_pos, end_pos, text)
		SELECT chunks_map.new_id, docs_map.new_id, c.seq, c.page, c.heading, c.start_pos, c.end_pos, c.text
		FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS chunks_map (old_id, new_id, n)
		JOIN chunks c ON c.id = chunks_map.old_id
		JOIN unnest($3::text[], $4::text[]) AS docs_map (old_id, new_id) ON docs_map.old_id = c.document_id
		ORDER BY chunks_map.n`,
		oldChunks, newIDs(len(oldChunks)), docs, newDocs); err != nil {
		return nil, err
	}

	// The sources asked for that the conversation has attached, in the
	// order they were attached.
	if _, err := tx.Exec(ctx, `
		INSERT INTO conversation_db_sources (conversation_id, source_name, created_at)
		SELECT $1, source_name, $2 FROM conversation_db_sources
		WHERE conversation_id = $3 AND source_name = ANY($4)
		ORDER BY created_at, row_seq`, to, now, from, record.NonNil(cp.Sources)); err != nil {
		return nil, err
	}

	// The dictionary's semantic layer, for the datasets and sources copied.
	var stored string
	err = tx.QueryRow(ctx, `SELECT layer FROM semantic_layers WHERE conversation_id = $1`, from).Scan(&stored)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, err
	}
	layer, err := record.CopyLayer(stored, out.Datasets, cp.Sources)
	if err != nil {
		return nil, err
	}
	if layer != "" {
		if _, err := tx.Exec(ctx, `INSERT INTO semantic_layers (conversation_id, layer) VALUES ($1, $2)`, to, layer); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// newIDs returns n new ids.
func newIDs(n int) []string {
	list := make([]string, n)
	for i := range list {
		list[i] = record.NewID()
	}
	return list
}

// firstColumn returns the first column of a query's rows, as text.
func firstColumn(ctx context.Context, tx pgx.Tx, query string, args ...any) ([]string, error) {
	rows, err := tx.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	list, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return record.NonNil(list), err
}
