package datachat

// Kinds of [QueryError]: what went wrong with a query, in words a model can
// act on — the same for a dataset's SQL engine and a live database source, so
// that the model and the chat loop read one failure as they read the other.
const (
	KindSyntax        = "syntax error"
	KindUnknownTable  = "unknown table"
	KindUnknownColumn = "unknown column"
	KindTypeMismatch  = "type mismatch"
	KindTimeout       = "timeout"
	KindMemory        = "memory limit"
	KindRefused       = "refused by the sandbox"
	KindOther         = "error"
)

// QueryError is a query that failed. Kind is one of the Kind constants;
// Message is the engine's own message with its detail and hints (without a
// "Binder Error:"-style prefix), or the sandbox's reason.
//
// Every QueryError is a client error: errors.As(err, new(*Error)) gives an
// EINVALID error carrying the same text.
type QueryError struct {
	Kind    string
	Message string
}

func (e *QueryError) Error() string { return e.Kind + ": " + e.Message }

// As lets ErrorCode and ErrorMessage see a QueryError as an EINVALID *Error.
func (e *QueryError) As(target any) bool {
	if t, ok := target.(**Error); ok {
		*t = &Error{Code: EINVALID, Message: e.Error()}
		return true
	}
	return false
}
