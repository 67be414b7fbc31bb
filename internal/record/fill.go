package record

import (
	"time"

	"datachat"
)

// The Fill functions below check and complete what a Create method is given,
// before either store writes it: an empty ID becomes a new one, a zero
// CreatedAt (StartedAt) now, and every time takes its stored form.

// FillUsage gives a token usage record its id and time.
func FillUsage(u *datachat.Usage) {
	FillCreated(&u.ID, &u.CreatedAt)
}

// FillToolCall checks tc (EINVALID if its Args is not JSON) and gives it its
// id and start time.
func FillToolCall(tc *datachat.ToolCall) error {
	if err := tc.Validate(); err != nil {
		return err
	}
	FillCreated(&tc.ID, &tc.StartedAt)
	return nil
}

// FillConfirmation checks c and gives it its id, its times and, when it has
// none, the pending status.
func FillConfirmation(c *datachat.Confirmation) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if c.Status == "" {
		c.Status = datachat.ConfirmPending
	}
	FillCreated(&c.ID, &c.CreatedAt)
	c.ResolvedAt = TimePtr(c.ResolvedAt)
	return nil
}

// CheckResolution refuses (EINVALID) a status a pending confirmation cannot
// be resolved to: only approved and declined are.
func CheckResolution(status string) error {
	if status != datachat.ConfirmApproved && status != datachat.ConfirmDeclined {
		return datachat.Errorf(datachat.EINVALID, "invalid confirmation status %q: want %s or %s",
			status, datachat.ConfirmApproved, datachat.ConfirmDeclined)
	}
	return nil
}

// FillAPIKey checks k (EINVALID without a hash) and gives it its id and times.
func FillAPIKey(k *datachat.APIKey) error {
	if k.Hash == "" {
		return datachat.Errorf(datachat.EINVALID, "API key hash is empty")
	}
	FillCreated(&k.ID, &k.CreatedAt)
	k.LastUsedAt, k.RevokedAt = TimePtr(k.LastUsedAt), TimePtr(k.RevokedAt)
	return nil
}

// LastUsedGranularity is how stale a key's last_used_at may get before
// Authenticate writes it again: one write a minute per key, not per request.
const LastUsedGranularity = time.Minute

// RecordUse reports whether Authenticate, at now, should store a key's use
// again, given when it was last stored (nil: never).
func RecordUse(lastUsed *time.Time, now time.Time) bool {
	return lastUsed == nil || now.Sub(*lastUsed) >= LastUsedGranularity
}

// FillDataset gives d its id and time and returns its columns as stored:
// JSON, without their descriptions.
func FillDataset(d *datachat.Dataset) (columns string, err error) {
	FillCreated(&d.ID, &d.CreatedAt)
	return JSON(WithoutDescriptions(d.Columns))
}

// FillDocument gives d and its chunks their ids, the chunks their
// DocumentID, d its time and, when zero, its chunk count, and returns d's
// metadata as stored (JSON).
func FillDocument(d *datachat.Document, chunks []*datachat.Chunk) (metadata string, err error) {
	FillCreated(&d.ID, &d.CreatedAt)
	if d.Chunks == 0 {
		d.Chunks = len(chunks)
	}
	meta, err := JSON(d.Metadata)
	if err != nil {
		return "", err
	}
	for _, c := range chunks {
		if c.ID == "" {
			c.ID = NewID()
		}
		c.DocumentID = d.ID
	}
	return meta, nil
}

// FillDBSource checks a database source (EINVALID without a name or a sealed
// URL), defaults its Origin to the CLI, and returns its tables and users as
// stored: JSON arrays, "[]" when empty.
func FillDBSource(s *datachat.DBSource) (tables, users string, err error) {
	if s.Name == "" || s.SealedURL == "" {
		return "", "", datachat.Errorf(datachat.EINVALID, "a database source needs a name and a sealed URL")
	}
	if s.Origin == "" {
		s.Origin = datachat.OriginCLI
	}
	s.Tables, s.Users = NonNil(s.Tables), NonNil(s.Users)
	if tables, err = JSON(s.Tables); err != nil {
		return "", "", err
	}
	users, err = JSON(s.Users)
	return tables, users, err
}
