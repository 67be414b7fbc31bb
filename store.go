package datachat

import (
	"context"
	"time"
)

// Lease marks a streaming message as being written by a live process, so that
// other processes sharing the database leave it alone: the rule that messages
// left streaming become interrupted when a process starts must not interrupt the
// turns of another process behind the same load balancer. The writing process
// renews the lease while the turn runs; once it lapses, the message is taken
// for left behind.
type Lease struct {
	// Owner identifies one run of one process; a new start gets a new Owner.
	Owner string
	// Node is where the process serves: its host name and listen address. Two
	// live processes cannot listen on the same address of one host, so a
	// process starting on a Node knows that other owners on it are gone.
	Node string
	// Until is when the lease lapses unless renewed.
	Until time.Time
}

// LiveAt reports whether the lease still holds at now: it lapses at Until, and
// a zero Until (a message stored without a lease) never holds.
func (l Lease) LiveAt(now time.Time) bool { return l.Until.After(now) }

// AdmitTurn is the rule [MessageStore.BeginTurn] applies to a conversation whose
// messages still streaming hold leases (a zero Lease for one stored without
// any): ErrReplyInProgress when any of them is live at now, since its process
// is still writing that reply; otherwise the turn may begin, and interrupt
// reports that there are messages left streaming by processes that are gone,
// to be marked interrupted first. Each store reads the leases and applies the
// outcome in its own SQL, in the transaction that stores the turn.
func AdmitTurn(streaming []Lease, now time.Time) (interrupt bool, err error) {
	for _, l := range streaming {
		if l.LiveAt(now) {
			return false, ErrReplyInProgress
		}
	}
	return len(streaming) > 0, nil
}

// StreamingFlush is one streaming message's share of [MessageStore.FlushStreaming]:
// the parts it streamed since its last flush, numbered from First as
// [MessageStore.AppendParts] numbers them (none: nothing to append), and its renewed
// lease when Lease is not nil.
type StreamingFlush struct {
	MessageID string
	First     int
	Parts     []Part
	Lease     *Lease
}

// Store persists everything datachat keeps. internal/sqlite and internal/postgres
// implement it; internal/storetest holds the conformance suite both pass.
//
// Create methods fill in an empty ID and a zero CreatedAt (and UpdatedAt). Methods
// that look a row up by id return ENOTFOUND when there is none; methods taking a
// userID return ENOTFOUND as well when the row belongs to another user, so a
// user can never tell another user's ids from unknown ones.
type Store interface {
	AccountStore
	KeyStore
	ConversationStore
	MessageStore
	DictionaryStore
	ExampleStore
	DatasetStore
	DocumentStore
	ConfirmationStore
	UsageStore
	DBSourceStore
	AuditStore
	ShareStore

	// Ping checks the database answers.
	Ping(ctx context.Context) error
	Close() error
}

// KeyStore holds the users' API keys and authenticates requests by them.
type KeyStore interface {
	// EnsureUser returns the user with this name, creating it, a member, if
	// needed; EINVALID for a name [CheckUserName] refuses.
	EnsureUser(ctx context.Context, name string) (*User, error)
	// CreateAPIKey stores k (Hash and UserID set by the caller).
	CreateAPIKey(ctx context.Context, k *APIKey) error
	// APIKeys lists every key, revoked ones included, oldest first, with UserName.
	APIKeys(ctx context.Context) ([]*APIKey, error)
	// CountAPIKeys counts keys that are not revoked.
	CountAPIKeys(ctx context.Context) (int, error)
	// RevokeAPIKey revokes a key by id; ENOTFOUND if there is none.
	RevokeAPIKey(ctx context.Context, id string) error
	// Authenticate returns the user owning the unrevoked key with this hash,
	// and the key as the request's Credential, and records its use (and the
	// user's LastSeenAt); EUNAUTHORIZED if there is none, and
	// [ErrUserDisabled] when its user is disabled.
	Authenticate(ctx context.Context, hash string) (*User, Credential, error)
	// RevokedCredentials returns those of creds that no longer authenticate,
	// each with why, in no particular order; none when all still do: any
	// credential whose user (UserID) is disabled or removed
	// ([ErrUserDisabled]); an API key revoked or deleted, or no longer its
	// UserID's ([ErrAPIKeyRevoked]); a session deleted — signed out, idled
	// out, ended by a password change — or not its UserID's
	// ([ErrSessionEnded]). It only reads (serve calls it twice a second for
	// the credentials of its open requests), and takes any number of creds.
	// EINVALID for a credential of a kind the store does not know.
	RevokedCredentials(ctx context.Context, creds []Credential) ([]Revocation, error)
}

// ConversationStore holds the users' conversations.
type ConversationStore interface {
	// CreateConversation stores c; its Notes are set later, with
	// UpdateDictionary.
	CreateConversation(ctx context.Context, c *Conversation) error
	Conversation(ctx context.Context, userID, id string) (*Conversation, error)
	// Conversations lists a user's conversations, most recently updated first.
	Conversations(ctx context.Context, userID string) ([]*Conversation, error)
	// SearchConversations lists a user's conversations whose title or any
	// message's text holds term ([SearchTerm]: compared ignoring ASCII
	// case), most recently updated first, at most limit of them; each with
	// the Snippet of the first message that holds it ("" when only the
	// title does). An empty term finds nothing.
	SearchConversations(ctx context.Context, userID, term string, limit int) ([]*ConversationMatch, error)
	// RenameConversation sets the title and bumps UpdatedAt.
	RenameConversation(ctx context.Context, userID, id, title string) (*Conversation, error)
	// DeleteConversation removes a conversation and everything in it.
	DeleteConversation(ctx context.Context, userID, id string) error
}

// MessageStore holds a conversation's messages and their tool calls, and the
// turns that write them: one turn at a time per conversation, across every
// process sharing the database.
type MessageStore interface {
	// CreateMessage stores m and bumps the conversation's UpdatedAt.
	CreateMessage(ctx context.Context, m *Message) error
	// UpdateMessage stores m's Content, Status, tokens, Error (with its reason
	// and suggested action) and Sources.
	// Messages returns Sources; RecentMessages (the turn's history) leaves
	// them out.
	UpdateMessage(ctx context.Context, m *Message) error
	// AppendParts adds the newest pieces of a streaming answer, numbered from
	// first (the count of parts appended before): the text that came since the
	// last append, and the tool calls started. Appending again from the same
	// first writes nothing twice, so a failed append can be retried. Messages
	// returns them (adjacent text joined); a message marked interrupted gets
	// their text as its Content. ENOTFOUND if there is no such message.
	AppendParts(ctx context.Context, messageID string, first int, parts []Part) error
	// FlushStreaming writes what the streaming messages of a process have
	// to write at once, in one transaction: for each, its new parts (as
	// AppendParts would) and its lease (as RenewLease would). A message that
	// no longer exists (its conversation was deleted meanwhile) is skipped
	// and its id returned in gone; the others are written. On an error
	// nothing is written, and the same batch can be flushed again.
	FlushStreaming(ctx context.Context, batch []StreamingFlush) (gone []string, err error)
	// FinishMessage stores how an answer ended, in one transaction: m's
	// Content, Status, tokens, error fields, Sources and Parts (replacing the
	// appended ones), and u, the turn's usage, when it is not nil. u's ID
	// makes it idempotent: finishing again with the same usage records it
	// once. ENOTFOUND if there is no such message.
	FinishMessage(ctx context.Context, m *Message, u *Usage) error
	// Messages returns a conversation's messages in order, each with its tool calls.
	Messages(ctx context.Context, conversationID string) ([]*Message, error)
	// RecentMessages returns the newest n messages in order, each with its
	// tool calls: what a turn reads, since it sends at most the newest 50.
	RecentMessages(ctx context.Context, conversationID string, n int) ([]*Message, error)
	// TurnStart reads what a turn starts from, in one read transaction: the
	// user's conversation (ENOTFOUND if it is not theirs), its pending
	// confirmation (nil when there is none) and its newest n messages, as
	// RecentMessages returns them.
	TurnStart(ctx context.Context, userID, conversationID string, n int) (*Conversation, *Confirmation, []*Message, error)
	// BeginTurn stores the messages that start a turn, in one transaction: user
	// (nil when there is none) and assistant, whose Status is streaming and which
	// is leased to lease. It is how "one turn at a time per conversation" holds
	// across every process sharing the database: when the conversation already
	// has a streaming message whose lease is live at now, it stores nothing and
	// returns ECONFLICT. Streaming messages of the conversation whose lease has
	// lapsed are marked interrupted first. ENOTFOUND if the conversation does not
	// exist.
	BeginTurn(ctx context.Context, user, assistant *Message, lease Lease, now time.Time) error
	// RenewLease sets a message's lease (a streaming turn renews it well before it
	// lapses); ENOTFOUND if there is no such message.
	RenewLease(ctx context.Context, messageID string, lease Lease) error
	// InterruptStreaming marks as interrupted the messages left streaming by a
	// process that is gone — those whose lease lapsed before now or that have
	// none, and those leased on node by another owner (an earlier run of the
	// process now serving there) — but never those leased to owner, and returns
	// how many there were. serve runs it at start and then periodically.
	InterruptStreaming(ctx context.Context, now time.Time, owner, node string) (int, error)
	// CreateToolCall stores one tool round of an assistant message.
	CreateToolCall(ctx context.Context, tc *ToolCall) error
}

// DictionaryStore holds a conversation's data dictionary and its semantic
// layer.
type DictionaryStore interface {
	// UpdateDictionary changes the data dictionary of a user's conversation
	// in one transaction: its notes when d.Notes is not nil, and for each
	// dataset d names (by table name) its description when not nil and the
	// descriptions of the columns given (an empty one removes it). Nothing
	// else changes, UpdatedAt included. ENOTFOUND if the conversation is not
	// the user's; EINVALID, changing nothing, when d names a table the
	// conversation lacks or a column its table lacks (the message names them
	// all).
	UpdateDictionary(ctx context.Context, userID, conversationID string, d Dictionary) error
	// SemanticLayer returns the semantic layer of a conversation's
	// dictionary ([SemanticLayer]): an empty one when it has none, or when
	// the conversation does not exist. UpdateDictionary changes it: a
	// dataset's metrics, synonyms and relationships (checked against the
	// datasets as their descriptions are), and d.Sources, which the caller
	// has checked against the sources' catalogs
	// ([Dictionary.ResolveSources]) and which is stored as it is given.
	SemanticLayer(ctx context.Context, conversationID string) (*SemanticLayer, error)
}

// ExampleStore holds the users' examples: questions with the SQL that
// answered them, marked correct or wrong.
type ExampleStore interface {
	// SaveExample stores a verified example of e.UserID. An example of the
	// same user for the same MessageID and CallID (when MessageID is set)
	// is replaced, keeping its ID, which e then holds. ENOTFOUND if the user
	// does not exist; EINVALID for a verdict other than correct or wrong.
	SaveExample(ctx context.Context, e *Example) error
	// Examples lists a user's verified examples, newest first.
	Examples(ctx context.Context, userID string) ([]*Example, error)
	// DeleteExample deletes a user's example; ENOTFOUND if there is none.
	DeleteExample(ctx context.Context, userID, id string) error
}

// DatasetStore holds the datasets of a conversation.
type DatasetStore interface {
	// CreateDataset stores d; its descriptions (Description and the
	// columns') are set later, with UpdateDictionary.
	CreateDataset(ctx context.Context, d *Dataset) error
	// Datasets lists a conversation's datasets in the order they were added.
	Datasets(ctx context.Context, conversationID string) ([]*Dataset, error)
	Dataset(ctx context.Context, conversationID, id string) (*Dataset, error)
	DeleteDataset(ctx context.Context, conversationID, id string) error
}

// DocumentStore holds the documents of a conversation and their chunks.
type DocumentStore interface {
	// CreateDocument stores a document and its chunks in one transaction.
	CreateDocument(ctx context.Context, d *Document, chunks []*Chunk) error
	Documents(ctx context.Context, conversationID string) ([]*Document, error)
	// HasDocuments reports whether the conversation has any document,
	// reading at most one row.
	HasDocuments(ctx context.Context, conversationID string) (bool, error)
	Document(ctx context.Context, conversationID, id string) (*Document, error)
	// Chunks returns every chunk of a conversation's documents.
	Chunks(ctx context.Context, conversationID string) ([]*Chunk, error)
	DeleteDocument(ctx context.Context, conversationID, id string) error
}

// ConfirmationStore holds the actions waiting for a user's confirmation.
type ConfirmationStore interface {
	CreateConfirmation(ctx context.Context, c *Confirmation) error
	// PendingConfirmation returns the conversation's pending confirmation, or
	// ENOTFOUND if there is none.
	PendingConfirmation(ctx context.Context, conversationID string) (*Confirmation, error)
	// ResolveConfirmation moves a pending confirmation to approved or declined;
	// ECONFLICT if it was already resolved, ENOTFOUND if it does not exist.
	ResolveConfirmation(ctx context.Context, id, status, note string) (*Confirmation, error)
}

// UsageStore records the tokens each turn used and counts the users'
// requests, for their budgets.
type UsageStore interface {
	// RecordUsage stores the token usage of one turn.
	RecordUsage(ctx context.Context, u *Usage) error
	// TokensSince sums a user's input and output tokens recorded at or after since.
	TokensSince(ctx context.Context, userID string, since time.Time) (int64, error)
	// TakeRequest admits one request for the user if fewer than limit were admitted
	// in the window ending at now, and records it. It is atomic across every
	// process sharing the database. When refused it returns false and how long
	// until a slot frees.
	TakeRequest(ctx context.Context, userID string, now time.Time, window time.Duration, limit int) (ok bool, retryAfter time.Duration, err error)
}

// DBSourceStore holds the database sources and the conversations they are
// attached to.
type DBSourceStore interface {
	// CreateDBSource stores a database source (Name, Kind, SealedURL,
	// Tables, Users or AllUsers, Origin); ECONFLICT if a source of that name
	// exists, EINVALID if Name or SealedURL is empty.
	CreateDBSource(ctx context.Context, s *DBSource) error
	// UpdateDBSource replaces the definition of the source named s.Name
	// (everything but Name and CreatedAt), keeping its attachments;
	// ENOTFOUND if there is none.
	UpdateDBSource(ctx context.Context, s *DBSource) error
	// DBSource returns the source of this name; ENOTFOUND if there is none.
	DBSource(ctx context.Context, name string) (*DBSource, error)
	// DBSources lists every source, by name.
	DBSources(ctx context.Context) ([]*DBSource, error)
	// DeleteDBSource removes a source and detaches it from every
	// conversation; ENOTFOUND if there is none.
	DeleteDBSource(ctx context.Context, name string) error
	// AttachDBSource attaches a source to a conversation; attaching it again
	// changes nothing. ENOTFOUND if the conversation or the source does not
	// exist. Whether the conversation's user may use the source is the
	// caller's to check (DBSource.Allows).
	AttachDBSource(ctx context.Context, conversationID, name string) error
	// DetachDBSource detaches a source from a conversation; ENOTFOUND if it
	// is not attached.
	DetachDBSource(ctx context.Context, conversationID, name string) error
	// ConversationDBSources lists the sources attached to a conversation, in
	// the order they were attached.
	ConversationDBSources(ctx context.Context, conversationID string) ([]*DBSource, error)
}

// AuditStore holds the audit log.
type AuditStore interface {
	// AppendAudit appends e to the audit log ([AuditEvent]), filling in an
	// empty ID and a zero Time; its text is kept as [AuditEvent.Clean]
	// leaves it, which e then holds. EINVALID for an unknown kind or
	// outcome. The log is append-only in the database itself: rows are
	// never updated, and deleted only by PruneAudit.
	AppendAudit(ctx context.Context, e *AuditEvent) error
	// AuditEvents lists the audit events f chooses, newest first (by Time,
	// then ID), one page of at most f.Limit; the page's Next continues
	// it, past events with the same Time too. EINVALID for an unknown kind
	// or outcome, a Since after Until, or a cursor no store made.
	AuditEvents(ctx context.Context, f AuditFilter) (*AuditPage, error)
	// PruneAudit deletes the audit events older than before, the only way
	// one leaves the log, and returns how many; when there were any, it
	// appends an AuditPruned event saying so in the same transaction.
	// EINVALID for a before later than now.
	PruneAudit(ctx context.Context, before time.Time) (int64, error)
}
