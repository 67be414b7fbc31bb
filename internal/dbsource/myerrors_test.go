package dbsource

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"datachat"
)

// TestMyClassify: a server message goes back only for the errors on the
// safe list; every other error, known to carry values or not known at all,
// is shown by its number only.
func TestMyClassify(t *testing.T) {
	e := &myEngine{db: &DB{src: Source{Name: "shop"}, opts: Options{}.withDefaults(), tables: []string{"shop.orders"}}}
	ctx := context.Background()
	for _, tc := range []struct {
		number uint16
		msg    string
		kind   string
		want   string // in the message shown
	}{
		{1105, "XPATH syntax error: '~hunter2'", datachat.KindOther, "error 1105"},
		{1292, "Truncated incorrect DOUBLE value: 'hunter2'", datachat.KindTypeMismatch, "error 1292"},
		{1366, "Incorrect integer value: 'hunter2' for column `x`", datachat.KindTypeMismatch, "error 1366"},
		{1265, "Data truncated for column 'hunter2'", datachat.KindTypeMismatch, "error 1265"},
		{1690, "BIGINT value is out of range in 'hunter2'", datachat.KindTypeMismatch, "error 1690"},
		{3141, "Invalid JSON text in argument 1 to function json_extract: \"hunter2\"", datachat.KindTypeMismatch, "JSON"},
		{4038, "Syntax error in JSON text in argument 1 to function 'json_extract' at position 2 hunter2", datachat.KindTypeMismatch, "JSON"},
		{1139, "Got error 'hunter2' from regexp", datachat.KindOther, "regular expression"},
		{9999, "an error nobody knows: hunter2", datachat.KindOther, "error 9999"},
		{1146, "Table 'shop.order' doesn't exist", datachat.KindUnknownTable, "shop.orders"},
		{1054, "Unknown column 'x' in 'field list'", datachat.KindUnknownColumn, "Unknown column 'x'"},
		{1064, "You have an error in your SQL syntax; … near 'JSON)' at line 1", datachat.KindSyntax, "near 'JSON)'"},
		{1969, "Query execution was interrupted (max_statement_time exceeded)", datachat.KindTimeout, "statement timeout"},
		{1142, "SELECT command denied to user 'r'@'h' for table `shop`.`x`", datachat.KindRefused, "denied"},
		{1792, "Cannot execute statement in a READ ONLY transaction", datachat.KindRefused, "read-only"},
	} {
		err := e.classify(ctx, &mysql.MySQLError{Number: tc.number, Message: tc.msg})
		var qe *datachat.QueryError
		if !errors.As(err, &qe) {
			t.Errorf("%d: got %v", tc.number, err)
			continue
		}
		if qe.Kind != tc.kind || !strings.Contains(qe.Message, tc.want) {
			t.Errorf("%d: got %s: %s, want %s saying %q", tc.number, qe.Kind, qe.Message, tc.kind, tc.want)
		}
		if _, safe := mySafeErrors[tc.number]; !safe && strings.Contains(qe.Message, "hunter2") {
			t.Errorf("%d: the message shows the value: %s", tc.number, qe.Message)
		}
	}
	if err := e.classify(ctx, errors.New("driver: bad connection")); datachat.ErrorCode(err) == datachat.EINVALID {
		t.Errorf("a lost connection: got %v, want an internal error", err)
	}
}
