package record

import (
	"encoding/json"
	"fmt"
	"time"

	"datachat"
)

// Scanner is one row of a query: *sql.Row, *sql.Rows, pgx.Row, pgx.Rows.
type Scanner interface {
	Scan(dest ...any) error
}

// Decoder decodes both stores' rows into records, column by column in the
// order the *Columns constants name them (or, for a row without one, the
// method says). Time and NullTime give the scan destination of a timestamp
// column and of a nullable one: the one thing the stores' rows differ in
// (SQLite keeps timestamps as text, PostgreSQL as timestamptz).
type Decoder struct {
	Time     func(*time.Time) any
	NullTime func(**time.Time) any
}

// ConversationColumns are the columns [Decoder.Conversation] reads.
const ConversationColumns = `id, user_id, title, created_at, updated_at, notes`

// Conversation decodes a row of [ConversationColumns].
func (dc Decoder) Conversation(sc Scanner) (*datachat.Conversation, error) {
	var c datachat.Conversation
	if err := sc.Scan(&c.ID, &c.UserID, &c.Title, dc.Time(&c.CreatedAt), dc.Time(&c.UpdatedAt), &c.Notes); err != nil {
		return nil, err
	}
	return &c, nil
}

// Message decodes a row of id, conversation_id, role, content, status,
// input_tokens, output_tokens, error, error_reason, error_suggested_action,
// created_at, updated_at, sources and number_checks, without tool calls yet.
func (dc Decoder) Message(sc Scanner) (*datachat.Message, error) {
	m := &datachat.Message{ToolCalls: []datachat.ToolCall{}}
	if err := sc.Scan(&m.ID, &m.ConversationID, &m.Role, &m.Content, &m.Status,
		&m.InputTokens, &m.OutputTokens, &m.Error, &m.ErrorReason, &m.ErrorSuggestedAction,
		dc.Time(&m.CreatedAt), dc.Time(&m.UpdatedAt), ScanJSON(&m.Sources), ScanJSON(&m.NumberChecks)); err != nil {
		return nil, err
	}
	return m, nil
}

// ToolCallColumns are the columns [Decoder.ToolCall] reads, of a table
// aliased t.
const ToolCallColumns = `t.id, t.message_id, t.seq, t.call_id, t.tool, t.args, t.ok, t.result, t.error,
	t.started_at, t.duration_ms, t.columns`

// ToolCall decodes a row of [ToolCallColumns].
func (dc Decoder) ToolCall(sc Scanner) (datachat.ToolCall, error) {
	var tc datachat.ToolCall
	err := sc.Scan(&tc.ID, &tc.MessageID, &tc.Seq, &tc.CallID, &tc.Tool, ScanRawJSON(&tc.Args),
		&tc.OK, &tc.Result, &tc.Error, dc.Time(&tc.StartedAt), &tc.DurationMS, ScanJSON(&tc.Columns))
	return tc, err
}

// Lease decodes a row of a message's lease_owner, lease_node and
// lease_until: a zero Until when it has no lease.
func (dc Decoder) Lease(sc Scanner) (datachat.Lease, error) {
	var l datachat.Lease
	var until *time.Time
	if err := sc.Scan(&l.Owner, &l.Node, dc.NullTime(&until)); err != nil {
		return l, err
	}
	if until != nil {
		l.Until = *until
	}
	return l, nil
}

// DatasetColumns are the columns [Decoder.Dataset] reads.
const DatasetColumns = `id, conversation_id, name, source, format, path, columns, row_count, bytes, created_at, description, column_descriptions`

// Dataset decodes a row of [DatasetColumns].
func (dc Decoder) Dataset(sc Scanner) (*datachat.Dataset, error) {
	var d datachat.Dataset
	var descs map[string]string
	if err := sc.Scan(&d.ID, &d.ConversationID, &d.Name, &d.Source, &d.Format, &d.Path,
		ScanJSON(&d.Columns), &d.RowCount, &d.Bytes, dc.Time(&d.CreatedAt), &d.Description, ScanJSON(&descs)); err != nil {
		return nil, err
	}
	d.SetColumnDescriptions(descs)
	return &d, nil
}

// DocumentColumns are the columns [Decoder.Document] reads.
const DocumentColumns = `id, conversation_id, name, media_type, pages, chunks, bytes, metadata, created_at`

// Document decodes a row of [DocumentColumns].
func (dc Decoder) Document(sc Scanner) (*datachat.Document, error) {
	var d datachat.Document
	if err := sc.Scan(&d.ID, &d.ConversationID, &d.Name, &d.MediaType, &d.Pages, &d.Chunks, &d.Bytes,
		ScanJSON(&d.Metadata), dc.Time(&d.CreatedAt)); err != nil {
		return nil, err
	}
	return &d, nil
}

// Chunk decodes a row of a chunk's id, document_id, seq, page, heading,
// start_pos, end_pos and text.
func (dc Decoder) Chunk(sc Scanner) (*datachat.Chunk, error) {
	var c datachat.Chunk
	err := sc.Scan(&c.ID, &c.DocumentID, &c.Seq, &c.Page, &c.Heading, &c.Start, &c.End, &c.Text)
	return &c, err
}

// ConfirmationColumns are the columns [Decoder.Confirmation] reads.
const ConfirmationColumns = `id, conversation_id, COALESCE(message_id, ''), call_id, action, parameters,
	explanation, status, note, state, created_at, resolved_at`

// Confirmation decodes a row of [ConfirmationColumns].
func (dc Decoder) Confirmation(sc Scanner) (*datachat.Confirmation, error) {
	var c datachat.Confirmation
	if err := sc.Scan(&c.ID, &c.ConversationID, &c.MessageID, &c.CallID, &c.Action, ScanRawJSON(&c.Parameters),
		&c.Explanation, &c.Status, &c.Note, ScanRawJSON(&c.State), dc.Time(&c.CreatedAt), dc.NullTime(&c.ResolvedAt)); err != nil {
		return nil, err
	}
	return &c, nil
}

// DBSourceColumns are the columns [Decoder.DBSource] reads, of db_sources
// named s.
const DBSourceColumns = `s.name, s.kind, s.sealed_url, s.tables, s.users, s.all_users, s.origin, s.created_at`

// DBSource decodes a row of [DBSourceColumns].
func (dc Decoder) DBSource(sc Scanner) (*datachat.DBSource, error) {
	var src datachat.DBSource
	if err := sc.Scan(&src.Name, &src.Kind, &src.SealedURL, ScanJSON(&src.Tables), ScanJSON(&src.Users),
		&src.AllUsers, &src.Origin, dc.Time(&src.CreatedAt)); err != nil {
		return nil, err
	}
	src.Tables, src.Users = NonNil(src.Tables), NonNil(src.Users)
	return &src, nil
}

// APIKey decodes a row of a key's id, user_id, its user's name, prefix, hash,
// created_at, last_used_at and revoked_at.
func (dc Decoder) APIKey(sc Scanner) (*datachat.APIKey, error) {
	var k datachat.APIKey
	err := sc.Scan(&k.ID, &k.UserID, &k.UserName, &k.Prefix, &k.Hash,
		dc.Time(&k.CreatedAt), dc.NullTime(&k.LastUsedAt), dc.NullTime(&k.RevokedAt))
	return &k, err
}

// ExampleColumns are the columns [Decoder.Example] reads.
const ExampleColumns = `id, user_id, question, query, verdict, tables, conversation_id, message_id, call_id, created_at`

// Example decodes a row of [ExampleColumns].
func (dc Decoder) Example(sc Scanner) (*datachat.Example, error) {
	var e datachat.Example
	err := sc.Scan(&e.ID, &e.UserID, &e.Question, &e.SQL, &e.Verdict, ScanJSON(&e.Tables),
		&e.ConversationID, &e.MessageID, &e.CallID, dc.Time(&e.CreatedAt))
	return &e, err
}

// RawJSON binds caller-given JSON bytes to a JSON column, NULL when empty.
func RawJSON(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

// ScanRawJSON is a scan destination that keeps a JSON column's bytes in *p,
// nil for NULL.
func ScanRawJSON(p *json.RawMessage) any { return rawJSONDest{p} }

type rawJSONDest struct{ p *json.RawMessage }

func (d rawJSONDest) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*d.p = nil
	case string:
		*d.p = json.RawMessage(v)
	case []byte:
		*d.p = append(json.RawMessage(nil), v...)
	default:
		return fmt.Errorf("scan JSON: got %T, want text", src)
	}
	return nil
}

// ScanJSON is a scan destination that unmarshals a JSON column into v, left
// as it is when NULL.
func ScanJSON(v any) any { return jsonDest{v} }

type jsonDest struct{ v any }

func (d jsonDest) Scan(src any) error {
	var b []byte
	switch v := src.(type) {
	case nil:
		return nil
	case string:
		b = []byte(v)
	case []byte:
		b = v
	default:
		return fmt.Errorf("scan JSON: got %T, want text", src)
	}
	return json.Unmarshal(b, d.v)
}
