package sqlstore

import "testing"

func TestNumbered(t *testing.T) {
	for _, tc := range []struct{ query, want string }{
		{`SELECT 1`, `SELECT 1`},
		{`UPDATE t SET a = ? WHERE b = ? AND c < ?`, `UPDATE t SET a = $1 WHERE b = $2 AND c < $3`},
		{`SELECT '?' || ? FROM "a?b" WHERE x = ?`, `SELECT '?' || $1 FROM "a?b" WHERE x = $2`},
		{`SELECT 'it''s ?', ?`, `SELECT 'it''s ?', $1`},
	} {
		if got := Numbered(tc.query); got != tc.want {
			t.Errorf("Numbered(%q) = %q, want %q", tc.query, got, tc.want)
		}
		if got := Numbered(tc.query); got != tc.want {
			t.Errorf("Numbered(%q) again = %q, want %q", tc.query, got, tc.want)
		}
	}
}

// What numbering a query costs PostgreSQL's store on each statement once
// the text is cached:
//
//	go test -run '^$' -bench Numbered ./internal/sqlstore
func BenchmarkNumbered(b *testing.B) {
	query := `
		UPDATE messages SET content = ?, status = ?, input_tokens = ?, output_tokens = ?, error = ?,
			error_reason = ?, error_suggested_action = ?, sources = ?, number_checks = ?, updated_at = ?
		WHERE id = ?`
	Numbered(query)
	for b.Loop() {
		Numbered(query)
	}
}
