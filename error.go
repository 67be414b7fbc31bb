package datachat

import (
	"errors"
	"fmt"
)

// Error codes. Each maps to one HTTP status in internal/server and nowhere else.
const (
	EINVALID      = "invalid_request" // 400
	EUNAUTHORIZED = "unauthorized"    // 401
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
	Err     error
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
