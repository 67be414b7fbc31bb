package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Schema is an empty schema with a random name, created by [NewSchema]:
// tests and benchmarks sharing one database each work in their own, so runs
// never collide.
type Schema struct {
	// Name is the prefix given to NewSchema and 12 random hex digits.
	Name string
	// URL is the database's connection string with search_path set to
	// the schema: whatever opens it works in the schema.
	URL string
	dsn string
}

// NewSchema creates a schema named prefix and random hex digits in the
// database at dsn, a postgres:// URL or a key=value DSN. [Schema.Drop]
// drops it.
func NewSchema(ctx context.Context, dsn, prefix string) (*Schema, error) {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	s := &Schema{Name: prefix + hex.EncodeToString(b), dsn: dsn}
	var err error
	if s.URL, err = withSearchPath(dsn, s.Name); err != nil {
		return nil, err
	}
	if err := s.exec(ctx, "CREATE SCHEMA "+s.Name); err != nil {
		return nil, fmt.Errorf("create schema %s: %w", s.Name, err)
	}
	return s, nil
}

// Drop drops the schema and everything in it.
func (s *Schema) Drop(ctx context.Context) error {
	if err := s.exec(ctx, "DROP SCHEMA "+s.Name+" CASCADE"); err != nil {
		return fmt.Errorf("drop schema %s: %w", s.Name, err)
	}
	return nil
}

// exec runs sql on a connection of its own to the database (not the schema).
func (s *Schema) exec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, s.dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// withSearchPath adds search_path to a URL or a key=value DSN.
func withSearchPath(dsn, schema string) (string, error) {
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		return dsn + " search_path=" + schema, nil
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("database URL: %w", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), nil
}
