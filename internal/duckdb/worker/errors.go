package worker

import (
	"strings"
	"sync/atomic"

	"github.com/duckdb/duckdb-go/v2/mapping"

	"datachat"
	"datachat/internal/sqlvalue"
)

func refused(format string) *datachat.QueryError {
	return &datachat.QueryError{Kind: datachat.KindRefused, Message: format}
}

// wroteNoSpace is set, in a worker, when a write failed because the disk is
// full: DuckDB's (an I/O error saying so: spilling, writing Parquet) or our
// own (decompressing, transcoding an upload). Whatever error the request then
// ends with — DuckDB's message may have been wrapped into one naming the
// user's file — its reply is the server's full disk (see wire.EncodeError). A
// worker serves one request at a time; reply clears it.
var wroteNoSpace atomic.Bool

// noteNoSpace records a DuckDB error that is a full disk.
func noteNoSpace(t mapping.ErrorType, msg string) {
	if t != mapping.ErrorTypeErrorIO && !strings.HasPrefix(msg, "IO Error:") {
		return
	}
	if strings.Contains(msg, "No space left on device") || strings.Contains(msg, "Disk quota exceeded") {
		wroteNoSpace.Store(true)
	}
}

// noteWriteErr records a write of our own that failed on a full disk, and
// returns err.
func noteWriteErr(err error) error {
	if err != nil && datachat.IsNoSpace(err) {
		wroteNoSpace.Store(true)
	}
	return err
}

// newDuckError is a DuckDB error of a statement of our own.
func newDuckError(t mapping.ErrorType, msg string) *duckError {
	noteNoSpace(t, msg)
	return &duckError{typ: t, msg: cutMessage(msg)}
}

// maxMessage is how much of a DuckDB error message is kept: enough for any
// message DuckDB writes itself, with its candidates; a query can make one
// as long as it likes (error(repeat('x', 1e7)), a cast quoting its input),
// and the message goes to the model and the page.
const maxMessage = 4 << 10

// cutMessage cuts msg to maxMessage bytes, on a character boundary, saying so.
func cutMessage(msg string) string {
	if len(msg) <= maxMessage {
		return msg
	}
	return msg[:sqlvalue.Cut([]byte(msg), maxMessage)] + "… (message cut)"
}

// classify turns a DuckDB error into a datachat.QueryError.
func classify(t mapping.ErrorType, msg string) *datachat.QueryError {
	noteNoSpace(t, msg)
	msg = strings.TrimSpace(msg)
	body := msg
	if prefix, rest, ok := strings.Cut(msg, ": "); ok && strings.HasSuffix(prefix, "Error") && !strings.Contains(prefix, "\n") {
		body = rest
		if t == mapping.ErrorTypeInvalid || t == mapping.ErrorTypeUnknownType {
			t = errorTypeByPrefix(prefix)
		}
	}
	kind := datachat.KindOther
	switch t {
	case mapping.ErrorTypeParser, mapping.ErrorTypeSyntax:
		kind = datachat.KindSyntax
	case mapping.ErrorTypeCatalog:
		switch {
		case strings.Contains(body, "Table with name"):
			kind = datachat.KindUnknownTable
		case strings.Contains(body, "read-only"), strings.Contains(body, "in-memory database"):
			kind = datachat.KindRefused
		}
	case mapping.ErrorTypeBinder:
		switch {
		case strings.Contains(body, "Referenced column"), strings.Contains(body, "does not have a column named"),
			strings.Contains(body, "Column \"") && strings.Contains(body, "not found"):
			kind = datachat.KindUnknownColumn
		case strings.Contains(body, "Referenced table"), strings.Contains(body, "Table \"") && strings.Contains(body, "not found"):
			kind = datachat.KindUnknownTable
		case strings.Contains(body, "No function matches"), strings.Contains(body, "Cannot compare"),
			strings.Contains(body, "Cannot mix"), strings.Contains(body, "type mismatch"),
			strings.Contains(body, "Could not convert"), strings.Contains(body, "explicit cast"),
			strings.Contains(body, "No operator matches"):
			kind = datachat.KindTypeMismatch
		}
	case mapping.ErrorTypeConversion, mapping.ErrorTypeMismatchType, mapping.ErrorTypeInvalidType:
		kind = datachat.KindTypeMismatch
	case mapping.ErrorTypeOutOfMemory:
		kind = datachat.KindMemory
	case mapping.ErrorTypeInterrupt:
		kind = datachat.KindTimeout
	case mapping.ErrorTypePermission, mapping.ErrorTypeMissingExtension, mapping.ErrorTypeAutoload,
		mapping.ErrorTypeHTTP, mapping.ErrorTypeNetwork:
		kind = datachat.KindRefused
	case mapping.ErrorTypeInvalidInput, mapping.ErrorTypeSettings:
		if strings.Contains(body, "configuration has been locked") || strings.Contains(body, "read-only mode") ||
			strings.Contains(body, "disabled") {
			kind = datachat.KindRefused
		}
	}
	if kind == datachat.KindMemory {
		// DuckDB's advice (SET threads…, SET memory_limit…) is refused here.
		body, _, _ = strings.Cut(body, "\n\nPossible solutions:")
		body += "; make the query lighter: aggregate or filter first, select fewer or smaller columns"
	}
	return &datachat.QueryError{Kind: kind, Message: cutMessage(body)}
}

var errorPrefixes = map[string]mapping.ErrorType{
	"Out of Range Error":          mapping.ErrorTypeOutOfRange,
	"Conversion Error":            mapping.ErrorTypeConversion,
	"Mismatch Type Error":         mapping.ErrorTypeMismatchType,
	"Invalid type Error":          mapping.ErrorTypeInvalidType,
	"Catalog Error":               mapping.ErrorTypeCatalog,
	"Parser Error":                mapping.ErrorTypeParser,
	"Syntax Error":                mapping.ErrorTypeSyntax,
	"Binder Error":                mapping.ErrorTypeBinder,
	"Settings Error":              mapping.ErrorTypeSettings,
	"INTERRUPT Error":             mapping.ErrorTypeInterrupt,
	"Invalid Input Error":         mapping.ErrorTypeInvalidInput,
	"Out of Memory Error":         mapping.ErrorTypeOutOfMemory,
	"Permission Error":            mapping.ErrorTypePermission,
	"Missing Extension Error":     mapping.ErrorTypeMissingExtension,
	"Extension Autoloading Error": mapping.ErrorTypeAutoload,
	"HTTP Error":                  mapping.ErrorTypeHTTP,
	"Network Error":               mapping.ErrorTypeNetwork,
	"IO Error":                    mapping.ErrorTypeErrorIO,
}

func errorTypeByPrefix(prefix string) mapping.ErrorType {
	if t, ok := errorPrefixes[prefix]; ok {
		return t
	}
	return mapping.ErrorTypeInvalid
}
