// Package datachat holds the domain of the datachat server: conversations,
// messages and their tool rounds, datasets, documents, token usage, the error
// type with its codes, and the small interfaces between the parts. Packages under
// internal/ implement these interfaces, one dependency each; cmd/datachat wires
// them together.
package datachat

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// User owns conversations and API keys.
type User struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

// APIKey is a stored key. Only the SHA-256 hash of the secret is kept; Prefix is
// its first characters, for people to tell keys apart in listings.
type APIKey struct {
	ID         string     `json:"id"`
	UserID     string     `json:"user_id"`
	UserName   string     `json:"user"`
	Prefix     string     `json:"prefix"`
	Hash       string     `json:"-"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
}

// Conversation groups messages, datasets and documents of one user.
type Conversation struct {
	ID        string    `json:"id"`
	UserID    string    `json:"-"`
	Title     string    `json:"title"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// Notes are the user's business rules for this conversation's data
	// ("fiscal year starts in April"), given to the model with the schema.
	Notes string `json:"notes"`
}

// Message roles.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// Message statuses: streaming while a turn writes it, awaiting_confirmation
// while a turn waits for the user, then complete, error or interrupted.
const (
	StatusStreaming            = "streaming"
	StatusAwaitingConfirmation = "awaiting_confirmation"
	StatusComplete             = "complete"
	StatusCancelled            = "cancelled"
	StatusError                = "error"
	StatusInterrupted          = "interrupted"
)

// Message is one user or assistant message. An assistant message carries the
// tool rounds that ran while it was produced.
type Message struct {
	ID             string `json:"id"`
	ConversationID string `json:"conversation_id"`
	Role           string `json:"role"`
	Content        string `json:"content"`
	Status         string `json:"status"`
	InputTokens    int64  `json:"input_tokens"`
	OutputTokens   int64  `json:"output_tokens"`
	Error          string `json:"error,omitempty"`
	// ErrorReason and ErrorSuggestedAction are the failed answer's chat_error
	// reason and suggested action, so a reopened answer says what to do.
	ErrorReason          string     `json:"error_reason,omitempty"`
	ErrorSuggestedAction string     `json:"error_suggested_action,omitempty"`
	CreatedAt            time.Time  `json:"created_at"`
	UpdatedAt            time.Time  `json:"updated_at"`
	ToolCalls            []ToolCall `json:"tool_calls"`
	// Sources are the document excerpts an assistant answer could cite, [n]
	// being Sources[n-1]: those its prompt was built with, then those its
	// search_documents calls found. Stored when the answer ends; nil before.
	Sources []Source `json:"sources,omitempty"`
	// Parts are an assistant answer's text and tool calls in the order they
	// streamed, so a reopened answer reads as it did live. Content is the
	// text of its text parts, joined.
	Parts []Part `json:"parts,omitempty"`
	// PartsStored, when not 0, is how many of Parts the store holds already
	// under their index, as [MessageStore.FlushStreaming] wrote them while the answer
	// streamed; Parts are then the parts as they streamed, not merged, and
	// [MessageStore.FinishMessage] keeps the stored ones and writes only the rest,
	// not the whole answer again. 0: FinishMessage replaces the stored parts
	// with Parts, merged. Neither stored nor sent.
	PartsStored int `json:"-"`
	// NumberChecks are the numbers of an answer's text checked against what
	// it was built from (internal/numcheck): stored when it ends.
	NumberChecks []NumberCheck `json:"number_checks,omitempty"`
}

// NumberCheck is one number of an answer and whether it was found in the
// answer's evidence. Start and End count characters (runes) of the answer's
// text. Source is where it was found — {"tool_call_id","row","column"} (a
// result cell, or with null row and column the result's row count),
// {"question": true}, {"source_id"} of an excerpt, {"metric"} of the data
// dictionary's metric of that name — or null when unmatched.
type NumberCheck struct {
	Text   string          `json:"text"`
	Start  int             `json:"start"`
	End    int             `json:"end"`
	Status string          `json:"status"`
	Source json.RawMessage `json:"source"`
}

// Part types.
const (
	PartText     = "text"
	PartToolCall = "tool_call"
)

// Part is one piece of an answer: a run of text, or a tool call (named by the
// provider's call id, ToolCall.CallID).
type Part struct {
	Type   string `json:"type"`
	Text   string `json:"text,omitempty"`
	CallID string `json:"call_id,omitempty"`
}

// PartsText is the text of an answer's parts, joined.
func PartsText(parts []Part) string {
	var b strings.Builder
	for _, p := range parts {
		if p.Type == PartText {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// MergeParts joins adjacent text parts, as an answer's parts are shown.
func MergeParts(parts []Part) []Part {
	out := make([]Part, 0, len(parts))
	for _, p := range parts {
		if p.Type == PartText && len(out) > 0 && out[len(out)-1].Type == PartText {
			out[len(out)-1].Text += p.Text
			continue
		}
		if p.Type == PartText && p.Text == "" {
			continue
		}
		out = append(out, p)
	}
	return out
}

// ToolCall is one tool round of an assistant message: the call the model made and
// the result it was given back.
type ToolCall struct {
	ID         string          `json:"id"`
	MessageID  string          `json:"message_id"`
	Seq        int             `json:"seq"`
	CallID     string          `json:"call_id"` // the provider's id for the call
	Tool       string          `json:"tool"`
	Args       json.RawMessage `json:"args"`
	OK         bool            `json:"ok"`
	Result     string          `json:"result"` // the text the model received
	Error      string          `json:"error,omitempty"`
	StartedAt  time.Time       `json:"started_at"`
	DurationMS int64           `json:"duration_ms"`
	// Columns are an execute_sql result's columns (names and types), kept so
	// that a reopened answer shows each column as the live one did: the
	// Result text alone cannot tell a float column of whole numbers from an
	// integer one.
	Columns []Column `json:"columns,omitempty"`
}

// Validate returns EINVALID when Args is neither empty nor valid JSON.
func (tc *ToolCall) Validate() error {
	return checkJSON("tool call args", tc.Args)
}

// checkJSON returns EINVALID, naming what, when b is neither empty nor valid
// JSON.
func checkJSON(what string, b json.RawMessage) error {
	if len(b) > 0 && !json.Valid(b) {
		return Errorf(EINVALID, "%s is not valid JSON", what)
	}
	return nil
}

// Friendly type names, the Type of a [Column]: what a person calls a
// column's type, one name for DuckDB's many (INTEGER, BIGINT, HUGEINT → integer).
const (
	TypeInteger   = "integer"
	TypeFloat     = "float"
	TypeDecimal   = "decimal"
	TypeText      = "text"
	TypeBoolean   = "boolean"
	TypeDate      = "date"
	TypeTime      = "time"
	TypeTimestamp = "timestamp"
	TypeInterval  = "interval"
	TypeBlob      = "blob"
	TypeUUID      = "uuid"
	TypeList      = "list"
	TypeStruct    = "struct"
	TypeMap       = "map"
)

// Column describes a dataset or result column. Type is one of the friendly type
// names (integer, float, decimal, string, boolean, date, timestamp, …; see
// datachat.TypeInteger and the rest); SQLType is the engine's own.
type Column struct {
	Name    string   `json:"name"`
	Type    string   `json:"type"`
	SQLType string   `json:"sql_type"`
	Samples []string `json:"samples,omitempty"` // a few distinct values, for the model's prompt
	// Description is the user's, from the data dictionary (datasets only).
	Description string `json:"description,omitempty"`
}

// QueryResult is the result of one SQL query: the shape shared by POST …/sql,
// `datachat sql --format json` and tool_call_result. Rows hold JSON-ready values
// (DECIMAL, integers beyond ±2^53, NaN and ±Inf as strings; dates and times in
// ISO 8601; BLOB in base64).
type QueryResult struct {
	Columns   []Column `json:"columns"`
	Rows      [][]any  `json:"rows"`
	RowCount  int      `json:"row_count"`
	Truncated bool     `json:"truncated"`
	ElapsedMS float64  `json:"elapsed_ms"`
}

// How many excerpts a search returns: DefaultTopK unless asked for more or
// fewer; a request (the search API, a question's override) may ask for up to
// MaxTopK; the model's search_documents call for up to MaxToolTopK, since its
// excerpts fill the model's context.
const (
	DefaultTopK = 5
	MaxTopK     = 50
	MaxToolTopK = 20
)

// Source is a retrieved document chunk, as cited by an answer. Metadata holds document, document_id, page and the
// document's own metadata.
type Source struct {
	ID       string         `json:"id"`
	Text     string         `json:"text"`
	Metadata map[string]any `json:"metadata"`
	Distance *float64       `json:"distance"`
	Score    float64        `json:"score"`
}

// Citation names where a source comes from, as answers cite it: "report.pdf,
// page 4", or "notes.md, section \"Setup\"", or the document's name alone.
func (s Source) Citation() string {
	name, _ := s.Metadata["document"].(string)
	if name == "" {
		name = "document"
	}
	switch p := s.Metadata["page"].(type) {
	case int:
		if p > 0 {
			return fmt.Sprintf("%s, page %d", name, p)
		}
	case float64:
		if p > 0 {
			return fmt.Sprintf("%s, page %d", name, int(p))
		}
	}
	if h, _ := s.Metadata["section"].(string); h != "" {
		return fmt.Sprintf("%s, section %q", name, h)
	}
	return name
}

// SearchQuery asks for the TopK chunks of a conversation's documents most
// relevant to Text, among those matching Filters.
type SearchQuery struct {
	Text    string
	TopK    int
	Filters map[string]any
}

// SearchResult is what a search found and what it cost.
type SearchResult struct {
	Sources     []Source
	EmbeddingMS float64
	RetrievalMS float64
}

// Dataset is a table of a conversation, stored as a file under the data directory.
type Dataset struct {
	ID             string    `json:"id"`
	ConversationID string    `json:"conversation_id"`
	Name           string    `json:"name"`   // table name
	Source         string    `json:"source"` // file name or URL
	Format         string    `json:"format"` // what came in: parquet, csv, tsv, json or xlsx (stored as Parquet)
	Path           string    `json:"-"`      // stored file, relative to the data directory
	Columns        []Column  `json:"columns"`
	RowCount       int64     `json:"row_count"`
	Bytes          int64     `json:"bytes"`
	CreatedAt      time.Time `json:"created_at"`
	// Notes say how the file was read when it matters (rows of a sheet
	// skipped, formula errors dropped); given when it is added, not stored.
	Notes []string `json:"notes,omitempty"`
	// Description is the user's, from the data dictionary; its columns'
	// are on Columns.
	Description string `json:"description"`
	// Metrics, Synonyms and Relationships are the data dictionary's
	// semantic layer of the dataset ([TableSemantics]).
	Metrics       map[string]Metric `json:"metrics,omitempty"`
	Synonyms      map[string]string `json:"synonyms,omitempty"`
	Relationships []ForeignKey      `json:"relationships,omitempty"`
}

// Document is an uploaded text document, split into chunks for retrieval.
type Document struct {
	ID             string            `json:"id"`
	ConversationID string            `json:"conversation_id"`
	Name           string            `json:"name"`
	MediaType      string            `json:"media_type"`
	Pages          int               `json:"pages"`
	Chunks         int               `json:"chunks"`
	Bytes          int64             `json:"bytes"`
	Metadata       map[string]string `json:"metadata"`
	CreatedAt      time.Time         `json:"created_at"`
}

// Chunk is a piece of a document's text with where it came from.
type Chunk struct {
	ID         string `json:"id"`
	DocumentID string `json:"document_id"`
	Seq        int    `json:"seq"`
	Page       int    `json:"page,omitempty"`
	Heading    string `json:"heading,omitempty"`
	Start      int    `json:"start"` // character offsets in the document's text
	End        int    `json:"end"`
	Text       string `json:"text"`
}

// Confirmation statuses.
const (
	ConfirmPending  = "pending"
	ConfirmApproved = "approved"
	ConfirmDeclined = "declined"
)

// Confirmation is an action the model asked the user to approve. It is
// stored so a reconnecting page can show it again.
type Confirmation struct {
	ID             string          `json:"id"`
	ConversationID string          `json:"conversation_id"`
	MessageID      string          `json:"message_id"`
	CallID         string          `json:"call_id"`
	Action         string          `json:"action"`
	Parameters     json.RawMessage `json:"parameters"`
	Explanation    string          `json:"explanation"`
	Status         string          `json:"status"`
	Note           string          `json:"note,omitempty"`
	State          json.RawMessage `json:"-"` // the turn's state needed to resume it
	CreatedAt      time.Time       `json:"created_at"`
	ResolvedAt     *time.Time      `json:"resolved_at,omitempty"`
}

// Validate returns EINVALID when Parameters or State is neither empty nor
// valid JSON, or when Status is none of the confirmation statuses; an empty
// Status is allowed, as the store stores it pending.
func (c *Confirmation) Validate() error {
	if err := checkJSON("confirmation parameters", c.Parameters); err != nil {
		return err
	}
	if err := checkJSON("confirmation state", c.State); err != nil {
		return err
	}
	switch c.Status {
	case "", ConfirmPending, ConfirmApproved, ConfirmDeclined:
		return nil
	}
	return Errorf(EINVALID, "invalid confirmation status %q", c.Status)
}

// Usage is the token usage of one chat turn, for successes and failures alike.
type Usage struct {
	ID             string    `json:"id"`
	UserID         string    `json:"user_id"`
	ConversationID string    `json:"conversation_id"`
	MessageID      string    `json:"message_id"`
	Provider       string    `json:"provider"`
	Model          string    `json:"model"`
	InputTokens    int64     `json:"input_tokens"`
	OutputTokens   int64     `json:"output_tokens"`
	Success        bool      `json:"success"`
	Estimated      bool      `json:"estimated"` // counts estimated at chars/4
	CreatedAt      time.Time `json:"created_at"`
}

type userIDKey struct{}

// WithUserID returns ctx carrying the ID of the user a request acts for, so
// that shared resources (the SQL engine's queue) can be shared fairly.
func WithUserID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, userIDKey{}, id)
}

// UserIDFrom returns the user ID set by [WithUserID], or "".
func UserIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(userIDKey{}).(string)
	return id
}
