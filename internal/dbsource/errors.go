package dbsource

import (
	"fmt"
	"slices"
	"strings"

	"datachat"
)

func refusedf(format string, args ...any) *datachat.QueryError {
	return &datachat.QueryError{Kind: datachat.KindRefused, Message: fmt.Sprintf(format, args...)}
}

// RoleError is a source whose role may do more than read the tables of
// --tables: read beyond them, or escape read-only. It is refused when the
// source is added, on every connect, before queries and periodically
// ([DB.Watch]). Privilege names what to take away, Fix how: the statement
// to run.
type RoleError struct {
	Source    string
	Role      string
	Privilege string
	Fix       string
}

func (e *RoleError) Error() string {
	return fmt.Sprintf("source %s: role %s has %s, which lets a query read beyond --tables or escape read-only; the source is refused until it is fixed: %s", e.Source, e.Role, e.Privilege, e.Fix)
}

// As shows a RoleError as an EINVALID *datachat.Error: the operator fixes it.
func (e *RoleError) As(target any) bool {
	if t, ok := target.(**datachat.Error); ok {
		*t = &datachat.Error{Code: datachat.EINVALID, Message: e.Error()}
		return true
	}
	return false
}

// LoginError is a source whose server answered but refused the connection:
// its login (role, password) or the database its URL names. Reason is the
// server's own message, which names neither the password nor the URL. The
// operator fixes the source's URL.
type LoginError struct {
	Source string
	Reason string
}

func (e *LoginError) Error() string {
	return fmt.Sprintf("source %s: the database server refused the connection: %s; correct the source's URL (datachat sources add %s again)", e.Source, e.Reason, e.Source)
}

// As shows a LoginError as an EINVALID *datachat.Error: the operator fixes it.
func (e *LoginError) As(target any) bool {
	if t, ok := target.(**datachat.Error); ok {
		*t = &datachat.Error{Code: datachat.EINVALID, Message: e.Error()}
		return true
	}
	return false
}

// candidates suggests tables for an unknown one: the allowed tables, closest
// names first, at most 8.
func candidates(missing string, tables []string) string {
	if len(tables) == 0 {
		return ""
	}
	missing = strings.ToLower(missing)
	if i := strings.LastIndexByte(missing, '.'); i >= 0 {
		missing = missing[i+1:]
	}
	sorted := slices.Clone(tables)
	dist := func(t string) int {
		if i := strings.LastIndexByte(t, '.'); i >= 0 {
			t = t[i+1:]
		}
		return levenshtein(missing, strings.ToLower(t))
	}
	slices.SortStableFunc(sorted, func(a, b string) int { return dist(a) - dist(b) })
	if len(sorted) > 8 {
		sorted = sorted[:8]
	}
	return "; the tables you can query: " + strings.Join(sorted, ", ")
}

func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			c := 1
			if ra[i-1] == rb[j-1] {
				c = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+c)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
