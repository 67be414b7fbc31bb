package datachat

import (
	"context"
	"time"
)

// Store persists everything datachat keeps. internal/sqlite and internal/postgres
// implement it; internal/storetest holds the conformance suite both pass.
//
// Create methods fill in an empty ID and a zero CreatedAt (and UpdatedAt). Methods
// that look a row up by id return ENOTFOUND when there is none; methods taking a
// userID return ENOTFOUND as well when the row belongs to another user, so a
// user can never tell another user's ids from unknown ones.
type Store interface {
	// EnsureUser returns the user with this name, creating it if needed.
	EnsureUser(ctx context.Context, name string) (*User, error)
	// CreateAPIKey stores k (Hash and UserID set by the caller).
	CreateAPIKey(ctx context.Context, k *APIKey) error
	// APIKeys lists every key, revoked ones included, oldest first, with UserName.
	APIKeys(ctx context.Context) ([]*APIKey, error)
	// CountAPIKeys counts keys that are not revoked.
	CountAPIKeys(ctx context.Context) (int, error)
	// RevokeAPIKey revokes a key by id; ENOTFOUND if there is none.
	RevokeAPIKey(ctx context.Context, id string) error
	// Authenticate returns the user owning the unrevoked key with this hash and
	// records its use; EUNAUTHORIZED if there is none.
	Authenticate(ctx context.Context, hash string) (*User, error)

	CreateConversation(ctx context.Context, c *Conversation) error
	Conversation(ctx context.Context, userID, id string) (*Conversation, error)
	// Conversations lists a user's conversations, most recently updated first.
	Conversations(ctx context.Context, userID string) ([]*Conversation, error)
	// RenameConversation sets the title and bumps UpdatedAt.
	RenameConversation(ctx context.Context, userID, id, title string) (*Conversation, error)
	// DeleteConversation removes a conversation and everything in it.
	DeleteConversation(ctx context.Context, userID, id string) error

	// CreateMessage stores m and bumps the conversation's UpdatedAt.
	CreateMessage(ctx context.Context, m *Message) error
	// UpdateMessage stores m's Content, Status, tokens and Error.
	UpdateMessage(ctx context.Context, m *Message) error
	// Messages returns a conversation's messages in order, each with its tool calls.
	Messages(ctx context.Context, conversationID string) ([]*Message, error)
	// InterruptStreaming marks every message left streaming as interrupted (run at
	// start-up, after a crash) and returns how many there were.
	InterruptStreaming(ctx context.Context) (int, error)
	// CreateToolCall stores one tool round of an assistant message.
	CreateToolCall(ctx context.Context, tc *ToolCall) error

	CreateDataset(ctx context.Context, d *Dataset) error
	// Datasets lists a conversation's datasets in the order they were added.
	Datasets(ctx context.Context, conversationID string) ([]*Dataset, error)
	Dataset(ctx context.Context, conversationID, id string) (*Dataset, error)
	DeleteDataset(ctx context.Context, conversationID, id string) error

	// CreateDocument stores a document and its chunks in one transaction.
	CreateDocument(ctx context.Context, d *Document, chunks []*Chunk) error
	Documents(ctx context.Context, conversationID string) ([]*Document, error)
	Document(ctx context.Context, conversationID, id string) (*Document, error)
	// Chunks returns every chunk of a conversation's documents.
	Chunks(ctx context.Context, conversationID string) ([]*Chunk, error)
	DeleteDocument(ctx context.Context, conversationID, id string) error

	CreateConfirmation(ctx context.Context, c *Confirmation) error
	// PendingConfirmation returns the conversation's pending confirmation, or
	// ENOTFOUND if there is none.
	PendingConfirmation(ctx context.Context, conversationID string) (*Confirmation, error)
	// ResolveConfirmation moves a pending confirmation to approved or declined;
	// ECONFLICT if it was already resolved, ENOTFOUND if it does not exist.
	ResolveConfirmation(ctx context.Context, id, status, note string) (*Confirmation, error)

	// RecordUsage stores the token usage of one turn.
	RecordUsage(ctx context.Context, u *Usage) error
	// TokensSince sums a user's input and output tokens recorded at or after since.
	TokensSince(ctx context.Context, userID string, since time.Time) (int64, error)
	// TakeRequest admits one request for the user if fewer than limit were admitted
	// in the window ending at now, and records it. It is atomic across every
	// process sharing the database. When refused it returns false and how long
	// until a slot frees.
	TakeRequest(ctx context.Context, userID string, now time.Time, window time.Duration, limit int) (ok bool, retryAfter time.Duration, err error)

	// Ping checks the database answers.
	Ping(ctx context.Context) error
	Close() error
}
