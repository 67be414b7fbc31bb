package dbsource

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"

	"datachat"
)

// A MySQL/MariaDB error message goes back to the user (and the model) only
// when it cannot carry data: a message that can echo a value (EXTRACTVALUE's
// "XPATH syntax error: '…'", a truncated or incorrect value, a number out of
// range, JSON errors, and anything not known) is replaced by a generic one
// with the error's number and what to do. Errors are told apart by number,
// never by reading the message.

// mySafeErrors are the errors whose message names only what the statement
// itself says (its identifiers, its text), the server's own limits or the
// account: they go back as the server wrote them, with the kind of error.
var mySafeErrors = map[uint16]string{
	// The statement's syntax: the message quotes the restored statement.
	1064: datachat.KindSyntax, 1149: datachat.KindSyntax, 1221: datachat.KindSyntax, 1248: datachat.KindSyntax,
	1060: datachat.KindSyntax, 1235: datachat.KindSyntax, 1630: datachat.KindSyntax, 1305: datachat.KindSyntax,
	// Names the statement used.
	1146: datachat.KindUnknownTable, 1109: datachat.KindUnknownTable, 1051: datachat.KindUnknownTable,
	1049: datachat.KindUnknownTable, 1356: datachat.KindUnknownTable,
	1054: datachat.KindUnknownColumn, 1052: datachat.KindUnknownColumn, 1247: datachat.KindUnknownColumn,
	// The statement's shape and types, without values.
	1241: datachat.KindTypeMismatch, 1222: datachat.KindTypeMismatch, 1242: datachat.KindTypeMismatch,
	1267: datachat.KindTypeMismatch, 1270: datachat.KindTypeMismatch, 1271: datachat.KindTypeMismatch,
	1582: datachat.KindTypeMismatch, 1583: datachat.KindTypeMismatch, 1584: datachat.KindTypeMismatch,
	1111: datachat.KindOther, 1055: datachat.KindOther, 1140: datachat.KindOther, 1463: datachat.KindOther,
	1365: datachat.KindOther,
	// The server's limits.
	1969: datachat.KindTimeout, 3024: datachat.KindTimeout, 1317: datachat.KindTimeout, 1028: datachat.KindTimeout,
	1038: datachat.KindMemory, 1041: datachat.KindMemory, 1114: datachat.KindMemory, 5: datachat.KindMemory,
	1037: datachat.KindMemory, 3015: datachat.KindMemory,
	1205: datachat.KindOther, 1213: datachat.KindOther, 1040: datachat.KindOther, 1203: datachat.KindOther,
	1226: datachat.KindOther,
	// Access and read-only.
	1792: datachat.KindRefused, 1044: datachat.KindRefused, 1045: datachat.KindRefused, 1142: datachat.KindRefused,
	1143: datachat.KindRefused, 1227: datachat.KindRefused, 1370: datachat.KindRefused, 1290: datachat.KindRefused,
	1148: datachat.KindRefused, 3948: datachat.KindRefused, 1295: datachat.KindRefused, 1314: datachat.KindRefused,
	1336: datachat.KindRefused, 1418: datachat.KindRefused,
}

// classify turns an error of the server into a *datachat.QueryError: the
// server's message when it cannot carry data (mySafeErrors), else a generic
// one with the error's number. Errors that are not the server's (a lost
// connection) are internal; ctx's error when ctx ended.
func (e *myEngine) classify(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return fmt.Errorf("source %s: %w", e.db.src.Name, err)
	}
	kind, safe := mySafeErrors[me.Number]
	if !safe {
		return myGeneric(me.Number)
	}
	msg := me.Message
	switch kind {
	case datachat.KindUnknownTable:
		msg += candidates(quotedIn(msg, "'"), e.db.allowedTables(ctx))
	case datachat.KindTimeout:
		msg = fmt.Sprintf("the query ran past the source's %v statement timeout (%s); make it lighter: filter or aggregate on indexed columns, or add LIMIT", e.db.opts.Timeout, msg)
	case datachat.KindRefused:
		if me.Number == 1792 {
			msg += " (sources are read-only)"
		}
	}
	return &datachat.QueryError{Kind: kind, Message: msg}
}

// myGeneric is the error shown for a server error whose message may carry
// table data: its number and what to do, never the message.
func myGeneric(n uint16) *datachat.QueryError {
	kind, what := datachat.KindOther, "rewrite the query, checking the functions and conversions it uses, and try again"
	switch {
	case n == 1105:
		what = "it is the server's catch-all error, raised among others by the XML functions (EXTRACTVALUE, UPDATEXML) on a path they cannot read: check the functions' arguments"
	case n == 1292 || n == 1366 || n == 1265 || n == 1690 || n == 1406 || n == 1264:
		kind, what = datachat.KindTypeMismatch, "a value did not convert or fit (a cast, a date, a number out of range): check the conversions and the types of the columns"
	case n >= 3140 && n <= 3160 || n >= 4036 && n <= 4048:
		kind, what = datachat.KindTypeMismatch, "a JSON function could not read a value or a path: check the JSON paths, and that the column holds valid JSON"
	case n == 1139 || n >= 3685 && n <= 3699:
		what = "a regular expression failed: check the pattern"
	}
	return &datachat.QueryError{Kind: kind, Message: fmt.Sprintf(
		"the database failed the query with error %d, whose message can show table values and so is not repeated; %s", n, what)}
}

// myNumber is the server's error number of err, 0 when err is not the
// server's.
func myNumber(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}
