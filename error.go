package datachat

import (
	"errors"
	"fmt"
	"syscall"
	"time"
)

// Error codes. Each maps to one HTTP status in internal/server and nowhere else.
const (
	EINVALID      = "invalid_request" // 400
	EUNAUTHORIZED = "unauthorized"    // 401
	EFORBIDDEN    = "forbidden"       // 403: signed in, but not allowed
	ENOTFOUND     = "not_found"       // 404
	ECONFLICT     = "conflict"        // 409
	ERATELIMIT    = "rate_limited"    // 429
	EPROVIDER     = "provider_error"  // 502
	EBUSY         = "busy"            // 503
	EINTERNAL     = "internal"        // 500
)

// Error is the application error. Message is safe to show to the user; Err, if
// set, carries the cause for logs and errors.Is/As and is never sent to a client.
type Error struct {
	Code    string
	Message string
	// RetryAfter, if set, is when the client may try again: the wait of an
	// ERATELIMIT refusal (see [RetryAfter]).
	RetryAfter time.Duration
	Err        error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with the given code and a formatted, user-facing message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// WrapError returns an *Error with the given code and message whose cause is err.
func WrapError(code, message string, err error) *Error {
	return &Error{Code: code, Message: message, Err: err}
}

// ErrorCode returns the code of the first *Error in err's chain, EINTERNAL for any
// other non-nil error, and "" for nil.
func ErrorCode(err error) string {
	var e *Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &e):
		return e.Code
	default:
		return EINTERNAL
	}
}

// ErrorMessage returns the user-facing message of the first *Error in err's chain,
// and "Internal error." for any other error, so details never reach a client.
func ErrorMessage(err error) string {
	var e *Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &e) && e.Code != EINTERNAL:
		return e.Message
	default:
		return "Internal error."
	}
}

// RetryAfter returns when the client may try again after err, found anywhere
// in its chain: an *Error's RetryAfter, else the wait of any error with a
// RetryAfter method (a [Condition] of the server, a busy worker); ok is false
// when err does not say.
func RetryAfter(err error) (d time.Duration, ok bool) {
	var e *Error
	if errors.As(err, &e) && e.RetryAfter > 0 {
		return e.RetryAfter, true
	}
	var ra interface{ RetryAfter() time.Duration }
	if errors.As(err, &ra) {
		return ra.RetryAfter(), true
	}
	return 0, false
}

// ErrReplyInProgress refuses a turn in a conversation where another reply is
// still being written: one turn at a time per conversation, held across
// processes by the store's lease (Store.BeginTurn) and within one by the chat
// Runner. It is the only message for it, wherever it is found.
var ErrReplyInProgress = &Error{Code: ECONFLICT, Message: "A reply is still being written in this conversation; wait for it or stop it first."}

// Conditions of the server itself — its database cannot be reached, its disk
// is full — are not the request's fault, nor a bug. They are classified once,
// where the failure is recognised (each store package classifies its own
// errors; whatever writes files classifies a full disk), as an EBUSY *Error
// (503) with a fixed message and a *Condition as its cause: the Condition says
// when to try again, which the server sends as Retry-After, and, for a
// chat_error, what is wrong and what to do.
var (
	// ErrStoreUnavailable is in the chain of a store error that means the
	// database cannot be reached or cannot answer now (see StoreUnavailable).
	ErrStoreUnavailable = errors.New("database unavailable")
	// ErrNoSpace is in the chain of an error caused by a full disk (see
	// NoSpace).
	ErrNoSpace = errors.New("no space left on the server's disk")
)

// How long clients are asked to wait (Retry-After) in each condition: a
// database outage usually ends in seconds (a restart, a failover), a full
// disk needs someone to free space.
const (
	StoreRetryAfter   = 5 * time.Second
	NoSpaceRetryAfter = time.Minute
)

// Condition is the cause of the EBUSY error of a condition of the server
// (StoreUnavailable, NoSpace). Its RetryAfter is the Retry-After the server
// sends; Reason and SuggestedAction fill a chat_error.
type Condition struct {
	Kind            error // ErrStoreUnavailable or ErrNoSpace
	Reason          string
	SuggestedAction string
	After           time.Duration
	Err             error // the failure the condition was recognised from, for logs
}

func (c *Condition) Error() string {
	if c.Err == nil {
		return c.Kind.Error()
	}
	return c.Kind.Error() + ": " + c.Err.Error()
}

// Unwrap gives errors.Is the Kind and errors.As the original failure (a
// driver's error type, syscall.ENOSPC…).
func (c *Condition) Unwrap() []error { return []error{c.Kind, c.Err} }

// RetryAfter is when to try again.
func (c *Condition) RetryAfter() time.Duration { return c.After }

// StoreUnavailable returns the error of a store operation that failed because
// the database cannot be reached or cannot answer now — connection refused or
// reset, the server shutting down, a lock held past the store's timeout, an
// I/O error — with err, the driver's error, as its cause. An err already
// classified is returned as it is.
func StoreUnavailable(err error) error {
	if classified(err) {
		return err
	}
	return &Error{Code: EBUSY, Message: "The database is unavailable; try again in a few seconds.", Err: &Condition{
		Kind:            ErrStoreUnavailable,
		Reason:          "The server cannot reach its database, or the database cannot answer now.",
		SuggestedAction: "Try again in a few seconds. If it goes on, tell the server's administrator.",
		After:           StoreRetryAfter,
		Err:             err,
	}}
}

// NoSpace returns the error of an operation that failed because the disk
// holding the server's data is full, with err, the failure, as its cause.
// The message names no file: the user's upload is not at fault. An err
// already classified is returned as it is.
func NoSpace(err error) error {
	if classified(err) {
		return err
	}
	return &Error{Code: EBUSY, Message: "The server is out of disk space; nothing new can be stored until space is freed.", Err: &Condition{
		Kind:            ErrNoSpace,
		Reason:          "The disk that holds the server's data is full.",
		SuggestedAction: "Delete datasets, documents or conversations you no longer need, or ask the server's administrator to free disk space, then try again.",
		After:           NoSpaceRetryAfter,
		Err:             err,
	}}
}

// IsNoSpace reports whether err comes from a full disk: ErrNoSpace, or the
// operating system's ENOSPC or EDQUOT, in its chain.
func IsNoSpace(err error) bool {
	return errors.Is(err, ErrNoSpace) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// ClassifyNoSpace returns NoSpace(err) when err comes from a full disk
// (IsNoSpace), else err unchanged.
func ClassifyNoSpace(err error) error {
	if err != nil && IsNoSpace(err) {
		return NoSpace(err)
	}
	return err
}

// classified reports whether err already carries a Condition.
func classified(err error) bool {
	var c *Condition
	return errors.As(err, &c)
}
