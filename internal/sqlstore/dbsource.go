package sqlstore

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
	_, err = s.write.Exec(ctx, `
		INSERT INTO db_sources (name, kind, sealed_url, tables, users, all_users, origin, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		src.Name, src.Kind, src.SealedURL, tables, users, s.d.Bool(src.AllUsers), src.Origin, s.d.Time(src.CreatedAt))
	return s.writeError(err, "create database source", "", fmt.Sprintf("a database source named %q already exists", src.Name))
}

// UpdateDBSource replaces a source's definition, keeping its attachments;
// ENOTFOUND if there is none.
func (s *Store) UpdateDBSource(ctx context.Context, src *datachat.DBSource) error {
	tables, users, err := record.FillDBSource(src)
	if err != nil {
		return err
	}
	n, err := s.write.Exec(ctx, `
		UPDATE db_sources SET kind = ?, sealed_url = ?, tables = ?, users = ?, all_users = ?, origin = ?
		WHERE name = ?`,
		src.Kind, src.SealedURL, tables, users, s.d.Bool(src.AllUsers), src.Origin, src.Name)
	return mustAffect(n, err, "update database source", "database source not found")
}

// DBSource returns the source of this name; ENOTFOUND if there is none.
func (s *Store) DBSource(ctx context.Context, name string) (*datachat.DBSource, error) {
	src, err := s.d.Decode.DBSource(s.read.QueryRow(ctx, `SELECT `+record.DBSourceColumns+` FROM db_sources s WHERE s.name = ?`, name))
	if err != nil {
		return nil, NotFoundIfNoRows(err, "get database source", "database source not found")
	}
	return src, nil
}

// DBSources lists every source, by name.
func (s *Store) DBSources(ctx context.Context) ([]*datachat.DBSource, error) {
	return QueryAll(ctx, s.read, s.d.Decode.DBSource, "list database sources", `SELECT `+record.DBSourceColumns+` FROM db_sources s ORDER BY s.name`+s.d.Bytewise)
}

// DeleteDBSource removes a source and, by the foreign key's cascade, its
// attachments; ENOTFOUND if there is none.
func (s *Store) DeleteDBSource(ctx context.Context, name string) error {
	n, err := s.write.Exec(ctx, `DELETE FROM db_sources WHERE name = ?`, name)
	return mustAffect(n, err, "delete database source", "database source not found")
}

// AttachDBSource attaches a source to a conversation, once; ENOTFOUND if
// either does not exist.
func (s *Store) AttachDBSource(ctx context.Context, conversationID, name string) error {
	_, err := s.write.Exec(ctx, `
		INSERT INTO conversation_db_sources (conversation_id, source_name, created_at) VALUES (?, ?, ?)
		ON CONFLICT (conversation_id, source_name) DO NOTHING`, conversationID, name, s.d.Time(record.Now()))
	return s.writeError(err, "attach database source", "conversation or database source not found", "")
}

// DetachDBSource detaches a source from a conversation; ENOTFOUND if it is
// not attached.
func (s *Store) DetachDBSource(ctx context.Context, conversationID, name string) error {
	n, err := s.write.Exec(ctx,
		`DELETE FROM conversation_db_sources WHERE conversation_id = ? AND source_name = ?`, conversationID, name)
	return mustAffect(n, err, "detach database source", "database source not attached to this conversation")
}

// ConversationDBSources lists the sources attached to a conversation, in the
// order they were attached.
func (s *Store) ConversationDBSources(ctx context.Context, conversationID string) ([]*datachat.DBSource, error) {
	return QueryAll(ctx, s.read, s.d.Decode.DBSource, "list the conversation's database sources", `SELECT `+record.DBSourceColumns+`
		FROM conversation_db_sources a JOIN db_sources s ON s.name = a.source_name
		WHERE a.conversation_id = ? ORDER BY a.created_at, a.`+s.d.RowSeq, conversationID)
}
