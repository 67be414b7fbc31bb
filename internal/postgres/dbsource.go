package postgres

import (
	"context"
	"fmt"

	"datachat"
	"datachat/internal/record"
)

// CreateDBSource stores a database source; ECONFLICT if one of its name
// exists.
func (s *Store) CreateDBSource(ctx context.Context, src *datachat.DBSource) error {
	tables, users, err := record.FillDBSource(src)
	if err != nil {
		return err
	}
	record.FillTime(&src.CreatedAt)
	_, err = s.pool.Exec(ctx, `
		INSERT INTO db_sources (name, kind, sealed_url, tables, users, all_users, origin, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		src.Name, src.Kind, src.SealedURL, tables, users, src.AllUsers, src.Origin, src.CreatedAt)
	return writeError(err, "create database source", "", fmt.Sprintf("a database source named %q already exists", src.Name))
}

// UpdateDBSource replaces a source's definition, keeping its attachments;
// ENOTFOUND if there is none.
func (s *Store) UpdateDBSource(ctx context.Context, src *datachat.DBSource) error {
	tables, users, err := record.FillDBSource(src)
	if err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `
		UPDATE db_sources SET kind = $1, sealed_url = $2, tables = $3, users = $4, all_users = $5, origin = $6
		WHERE name = $7`,
		src.Kind, src.SealedURL, tables, users, src.AllUsers, src.Origin, src.Name)
	if err != nil {
		return fmt.Errorf("update database source: %w", err)
	}
	return mustAffect(tag, "database source not found")
}

// DBSource returns the source of this name; ENOTFOUND if there is none.
func (s *Store) DBSource(ctx context.Context, name string) (*datachat.DBSource, error) {
	src, err := decode.DBSource(s.pool.QueryRow(ctx, `SELECT `+record.DBSourceColumns+` FROM db_sources s WHERE s.name = $1`, name))
	if err != nil {
		return nil, notFoundIfNoRows(err, "get database source", "database source not found")
	}
	return src, nil
}

// DBSources lists every source, by name.
func (s *Store) DBSources(ctx context.Context) ([]*datachat.DBSource, error) {
	return queryAll(ctx, s.pool, decode.DBSource, "list database sources", `SELECT `+record.DBSourceColumns+` FROM db_sources s ORDER BY s.name COLLATE "C"`)
}

// DeleteDBSource removes a source and, by the foreign key's cascade, its
// attachments; ENOTFOUND if there is none.
func (s *Store) DeleteDBSource(ctx context.Context, name string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM db_sources WHERE name = $1`, name)
	if err != nil {
		return fmt.Errorf("delete database source: %w", err)
	}
	return mustAffect(tag, "database source not found")
}

// AttachDBSource attaches a source to a conversation, once; ENOTFOUND if
// either does not exist.
func (s *Store) AttachDBSource(ctx context.Context, conversationID, name string) error {
	_, err := s.pool.Exec(ctx, `
		INSERT INTO conversation_db_sources (conversation_id, source_name, created_at) VALUES ($1, $2, $3)
		ON CONFLICT (conversation_id, source_name) DO NOTHING`, conversationID, name, record.Now())
	return writeError(err, "attach database source", "conversation or database source not found", "")
}

// DetachDBSource detaches a source from a conversation; ENOTFOUND if it is
// not attached.
func (s *Store) DetachDBSource(ctx context.Context, conversationID, name string) error {
	tag, err := s.pool.Exec(ctx,
		`DELETE FROM conversation_db_sources WHERE conversation_id = $1 AND source_name = $2`, conversationID, name)
	if err != nil {
		return fmt.Errorf("detach database source: %w", err)
	}
	return mustAffect(tag, "database source not attached to this conversation")
}

// ConversationDBSources lists the sources attached to a conversation, in the
// order they were attached.
func (s *Store) ConversationDBSources(ctx context.Context, conversationID string) ([]*datachat.DBSource, error) {
	return queryAll(ctx, s.pool, decode.DBSource, "list the conversation's database sources", `SELECT `+record.DBSourceColumns+`
		FROM conversation_db_sources a JOIN db_sources s ON s.name = a.source_name
		WHERE a.conversation_id = $1 ORDER BY a.created_at, a.row_seq`, conversationID)
}
