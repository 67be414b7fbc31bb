package dbsource

import (
	"context"
	"database/sql"
	"datachat"
	"fmt"
	"strconv"
	"strings"
)

// The sandbox's check of a MySQL/MariaDB statement reads the server's own
// resolution of it, made in the read-only transaction it then runs in:
// EXPLAIN (EXPLAIN EXTENDED on MariaDB) and the rewritten query the server
// prints after it (SHOW WARNINGS, note 1003), where every table is written
// fully qualified, `db`.`table` `alias`, views the optimizer merged are
// replaced by their tables, and literals are quoted by the server:
//
//   - the rewritten query must be a query (select, with, values);
//   - every `db`.`name` it prints that the catalog (information_schema.TABLES)
//     knows must be an allowed table; a view still printed (one MariaDB
//     computes apart, ALGORITHM=TEMPTABLE or with GROUP BY…) is refused, since
//     its tables are not shown; the catalogs (information_schema, mysql,
//     performance_schema, sys) are not allowed tables;
//   - every table EXPLAIN lists must be accounted for by a table or name of
//     the rewritten query, so that nothing it reads escapes the reading;
//   - stored functions (`db`.`f`(…)) and the built-ins that read files or
//     take locks (LOAD_FILE, GET_LOCK…) are refused, and so are server
//     variables (@@…);
//   - locking reads are refused: the server refuses FOR UPDATE in a read-only
//     transaction but not LOCK IN SHARE MODE, and it drops lock clauses of
//     subqueries from the rewritten query, so the statement's own words are
//     read for them (and for INTO OUTFILE/DUMPFILE), by MySQL's lexical rules.

// myDeniedFunctions are built-ins a query may not call, and why.
var myDeniedFunctions = map[string]string{
	"load_file":                         "it reads the server's files",
	"get_lock":                          "it takes a lock that outlives the query",
	"release_lock":                      "it handles the session's locks",
	"release_all_locks":                 "it handles the session's locks",
	"is_free_lock":                      "it handles the session's locks",
	"is_used_lock":                      "it handles the session's locks",
	"master_pos_wait":                   "it waits on replication",
	"master_gtid_wait":                  "it waits on replication",
	"source_pos_wait":                   "it waits on replication",
	"wait_for_executed_gtid_set":        "it waits on replication",
	"wait_until_sql_thread_after_gtids": "it waits on replication",
	"nextval":                           "it changes a sequence",
	"setval":                            "it changes a sequence",
	"lastval":                           "it reads the session's sequence state",
	"sys_exec":                          "it runs programs on the server",
	"sys_eval":                          "it runs programs on the server",
}

var myCatalogSchemas = map[string]bool{"information_schema": true, "mysql": true, "performance_schema": true, "sys": true}

type myTokKind int

const (
	tWord   myTokKind = iota // a bare word, lower-cased
	tQIdent                  // a `quoted` identifier
	tString                  // a '…' or "…" literal
	tPunct                   // one other character
	tSysVar                  // @@name
	tHint                    // the text of an optimizer hint, /*+ … */
)

type myTok struct {
	kind myTokKind
	text string
}

// myTokens splits MySQL text by the server's lexical rules (with backslash
// escapes and without ANSI_QUOTES, as every session is set up): comments are
// skipped, except that the content of /*! … */ and /*M! … */ is read as code,
// as the server runs it.
func myTokens(s string) ([]myTok, error) {
	var out []myTok
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		case c == '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '-' && i+2 < len(s) && s[i+1] == '-' && (s[i+2] <= ' '):
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '-' && i+2 == len(s) && s[i+1] == '-':
			i = len(s)
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			if i+2 < len(s) && s[i+2] == '!' || i+3 < len(s) && s[i+2] == 'M' && s[i+3] == '!' {
				i += 3
				if s[i-1] == 'M' {
					i++
				}
				for i < len(s) && s[i] >= '0' && s[i] <= '9' {
					i++
				}
				continue // the content is code; its "*/" is skipped below
			}
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				return nil, fmt.Errorf("an unterminated comment")
			}
			if i+2 < len(s) && s[i+2] == '+' {
				out = append(out, myTok{tHint, strings.ToLower(s[i+3 : i+2+end])})
			}
			i += 2 + end + 2
		case c == '*' && i+1 < len(s) && s[i+1] == '/':
			i += 2
		case c == '\'' || c == '"':
			j := i + 1
			closed := false
			for j < len(s) {
				if s[j] == '\\' {
					j += 2
					continue
				}
				if s[j] == c {
					if j+1 < len(s) && s[j+1] == c {
						j += 2
						continue
					}
					closed = true
					j++
					break
				}
				j++
			}
			if !closed {
				return nil, fmt.Errorf("an unterminated string")
			}
			out = append(out, myTok{tString, s[i:j]})
			i = j
		case c == '`':
			j := i + 1
			var b strings.Builder
			closed := false
			for j < len(s) {
				if s[j] == '`' {
					if j+1 < len(s) && s[j+1] == '`' {
						b.WriteByte('`')
						j += 2
						continue
					}
					closed = true
					j++
					break
				}
				b.WriteByte(s[j])
				j++
			}
			if !closed {
				return nil, fmt.Errorf("an unterminated quoted name")
			}
			out = append(out, myTok{tQIdent, b.String()})
			i = j
		case c == '@' && i+1 < len(s) && s[i+1] == '@':
			j := i + 2
			for j < len(s) && (isIdentPart(s[j]) || s[j] == '.' || s[j] == '`') {
				j++
			}
			out = append(out, myTok{tSysVar, s[i:j]})
			i = j
		case isIdentPart(c):
			j := i
			for j < len(s) && isIdentPart(s[j]) {
				j++
			}
			out = append(out, myTok{tWord, strings.ToLower(s[i:j])})
			i = j
		default:
			out = append(out, myTok{tPunct, string(c)})
			i++
		}
	}
	return out, nil
}

// lockingWords finds a locking clause (or INTO OUTFILE/DUMPFILE) among the
// words of a token stream.
func lockingWords(toks []myTok) string {
	var words []string
	for _, t := range toks {
		if t.kind == tWord {
			words = append(words, t.text)
		} else {
			words = append(words, "")
		}
	}
	for i := range words {
		next := func(k int) string {
			if i+k < len(words) {
				return words[i+k]
			}
			return ""
		}
		switch {
		case words[i] == "for" && (next(1) == "update" || next(1) == "share"):
			return "for " + next(1)
		case words[i] == "lock" && next(1) == "in" && next(2) == "share" && next(3) == "mode":
			return "lock in share mode"
		case words[i] == "into" && (next(1) == "outfile" || next(1) == "dumpfile"):
			return "into " + next(1)
		}
	}
	return ""
}

// myLexicalCheck refuses, before anything runs, what the server's rewritten
// query does not show: locking clauses and INTO OUTFILE/DUMPFILE.
func myLexicalCheck(stmt string) error {
	toks, err := myTokens(stmt)
	if err != nil {
		return &datachat.QueryError{Kind: datachat.KindSyntax, Message: "the statement has " + err.Error()}
	}
	for _, t := range toks {
		if t.kind == tHint && (strings.Contains(t.text, "max_execution_time") || strings.Contains(t.text, "set_var")) {
			return refusedf("optimizer hints that change the statement timeout or settings (MAX_EXECUTION_TIME, SET_VAR) are refused")
		}
	}
	switch w := lockingWords(toks); {
	case w == "":
		return nil
	case strings.HasPrefix(w, "into"):
		return refusedf("SELECT … %s writes a file on the server: refused; return the rows instead", strings.ToUpper(w))
	default:
		return refusedf("locking reads (%s) are refused: sources are read-only; drop the locking clause", strings.ToUpper(w))
	}
}

type explainRow struct {
	id, table string
	rows      float64
	filtered  float64
}

// check runs the sandbox's check of stmt in t and returns EXPLAIN's estimate
// of the rows it returns.
func (e *myEngine) check(ctx context.Context, t *myTx, stmt string) (int64, error) {
	explain := "EXPLAIN "
	if e.isMariaDB() {
		explain = "EXPLAIN EXTENDED "
	}
	rows, err := t.c.QueryContext(ctx, explain+stmt)
	if err != nil {
		return 0, e.explainFailed(ctx, t, err, stmt)
	}
	plan, err := readExplain(rows)
	if err != nil {
		return 0, e.classify(ctx, err, stmt)
	}
	rewritten, err := e.rewritten(ctx, t)
	if err != nil {
		return 0, err
	}
	if rewritten == "" {
		return 0, refusedf("only a query can run (SELECT, WITH … SELECT or VALUES): the server did not show this statement as one")
	}
	if err := e.checkRewritten(ctx, t, rewritten, plan); err != nil {
		return 0, err
	}
	est := 1.0
	for _, r := range plan {
		if r.id == "1" && r.rows > 0 {
			est *= r.rows * r.filtered / 100
		}
	}
	return int64(est + 0.5), nil
}

// explainFailed says why EXPLAIN did not take stmt. Writes are refused by
// the read-only transaction; for the rest, preparing the statement (the
// server parses it and runs nothing) tells a statement of another kind (SET,
// CALL, SHOW, LOAD DATA, COMMIT…) from one that is wrong, and gives the
// server's message about the statement as written.
func (e *myEngine) explainFailed(ctx context.Context, t *myTx, err error, stmt string) error {
	switch myNumber(err) {
	case 1792, 1969, 3024, 1317, 1028, 1044, 1045, 1142, 1143:
		return e.classify(ctx, err, stmt)
	}
	st, perr := t.c.PrepareContext(ctx, stmt)
	if perr != nil {
		if myNumber(perr) == 1295 { // valid, but not even preparable
			return refusedf("only a query can run (SELECT, WITH … SELECT or VALUES); this statement is of another kind")
		}
		return e.classify(ctx, perr, stmt)
	}
	st.Close()
	if n := myNumber(err); n == 1064 || n == 1146 && strings.Contains(err.Error(), "EXTENDED") {
		return refusedf("only a query can run (SELECT, WITH … SELECT or VALUES); this statement is of another kind")
	}
	return e.classify(ctx, err, stmt)
}

func readExplain(rows *sql.Rows) ([]explainRow, error) {
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(vals))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	var out []explainRow
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		r := explainRow{filtered: 100}
		for i, c := range cols {
			switch strings.ToLower(c) {
			case "id":
				r.id = vals[i].String
			case "table":
				r.table = vals[i].String
			case "rows":
				r.rows, _ = strconv.ParseFloat(vals[i].String, 64)
			case "filtered":
				if f, err := strconv.ParseFloat(vals[i].String, 64); err == nil {
					r.filtered = f
				}
			}
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// rewritten returns the query the server printed after EXPLAIN (note 1003).
func (e *myEngine) rewritten(ctx context.Context, t *myTx) (string, error) {
	rows, err := t.c.QueryContext(ctx, "SHOW WARNINGS")
	if err != nil {
		return "", e.classify(ctx, err, "")
	}
	defer rows.Close()
	var note string
	for rows.Next() {
		var level, msg string
		var code int
		if err := rows.Scan(&level, &code, &msg); err != nil {
			return "", err
		}
		if code == 1003 {
			note = msg
		}
	}
	return note, rows.Err()
}

func (e *myEngine) checkRewritten(ctx context.Context, t *myTx, text string, plan []explainRow) error {
	toks, err := myTokens(text)
	if err != nil || len(toks) == 0 {
		return refusedf("the sandbox could not read the server's rewriting of the query (%v)", err)
	}
	switch first := toks[0]; {
	case first.kind == tWord && (first.text == "select" || first.text == "with" || first.text == "values"):
	case first.kind == tPunct && first.text == "(":
	case first.kind == tWord && (first.text == "insert" || first.text == "update" || first.text == "delete" || first.text == "replace"):
		return refusedf("the statement writes (%s): sources are read-only", strings.ToUpper(first.text))
	default:
		return refusedf("only a query can run (SELECT, WITH … SELECT or VALUES)")
	}
	if w := lockingWords(toks); w != "" {
		return refusedf("locking reads (%s) are refused: sources are read-only", strings.ToUpper(w))
	}
	names := map[string]bool{} // every single name printed: aliases, CTEs, derived tables
	var pairs [][2]string
	for i := 0; i < len(toks); i++ {
		tk := toks[i]
		switch tk.kind {
		case tSysVar:
			return refusedf("server variables (%s) may not be read", tk.text)
		case tWord:
			if i+1 < len(toks) && toks[i+1].text == "(" && toks[i+1].kind == tPunct {
				if why, ok := myDeniedFunctions[tk.text]; ok {
					return refusedf("function %s is not allowed: %s", strings.ToUpper(tk.text), why)
				}
			}
			names[tk.text] = true
		case tQIdent:
			chain := []string{tk.text}
			for i+2 < len(toks) && toks[i+1].kind == tPunct && toks[i+1].text == "." && toks[i+2].kind == tQIdent {
				chain = append(chain, toks[i+2].text)
				i += 2
			}
			if i+1 < len(toks) && toks[i+1].kind == tPunct && toks[i+1].text == "(" {
				return refusedf("stored function %s is not allowed: queries may call only the server's built-in functions", strings.Join(chain, "."))
			}
			switch len(chain) {
			case 1:
				names[chain[0]] = true
			case 2:
				pairs = append(pairs, [2]string{chain[0], chain[1]})
				names[chain[1]] = true
			}
		}
	}
	if len(pairs) > 0 {
		if err := e.checkPairs(ctx, t, pairs); err != nil {
			return err
		}
	}
	for _, r := range plan {
		if r.table == "" || strings.HasPrefix(r.table, "<") {
			continue
		}
		if !names[r.table] && !names[strings.ToLower(r.table)] {
			return refusedf("the sandbox cannot tell which table %q of the plan is (a view computed apart?); query the allowed tables directly", r.table)
		}
	}
	return nil
}

// checkPairs looks up the `db`.`name` pairs of the rewritten query in the
// catalog: those that are tables or views must be allowed tables.
func (e *myEngine) checkPairs(ctx context.Context, t *myTx, pairs [][2]string) error {
	var where []string
	var args []any
	seen := map[[2]string]bool{}
	for _, p := range pairs {
		if seen[p] {
			continue
		}
		seen[p] = true
		if myCatalogSchemas[strings.ToLower(p[0])] {
			return refusedf("%s.%s is the server's catalog, which queries may not read; the allowed tables and their columns are listed in your instructions", p[0], p[1])
		}
		where = append(where, "(TABLE_SCHEMA = ? AND TABLE_NAME = ?)")
		args = append(args, p[0], p[1])
	}
	rows, err := t.c.QueryContext(ctx, "SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_TYPE FROM information_schema.TABLES WHERE "+strings.Join(where, " OR "), args...)
	if err != nil {
		return e.classify(ctx, err, "")
	}
	defer rows.Close()
	for rows.Next() {
		var schema, name, typ string
		if err := rows.Scan(&schema, &name, &typ); err != nil {
			return err
		}
		if !e.allow.allowed(schema, name) {
			return refusedf("table %s.%s is not one of the source's allowed tables (views count as the tables they read)%s",
				schema, name, candidates(name, e.db.allowedTables(ctx)))
		}
		if typ == "VIEW" {
			return refusedf("view %s.%s is computed apart by the server (TEMPTABLE, or with GROUP BY, DISTINCT, UNION…), so the tables it reads cannot be checked; query its tables directly", schema, name)
		}
	}
	return rows.Err()
}

func (e *myEngine) tableNames(ctx context.Context) ([]string, error) {
	t, err := e.begin(ctx, 0)
	if err != nil {
		return nil, err
	}
	defer t.end()
	tables, _, err := e.listTables(ctx, t)
	if err != nil {
		return nil, err
	}
	return qualifiedNames(tables), nil
}

// listTables lists the allowed tables, without columns, and where each is.
func (e *myEngine) listTables(ctx context.Context, t *myTx) ([]Table, map[[2]string]int, error) {
	rows, err := t.c.QueryContext(ctx, `SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_TYPE, TABLE_ROWS FROM information_schema.TABLES
		WHERE TABLE_SCHEMA NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys')
		ORDER BY TABLE_SCHEMA, TABLE_NAME`)
	if err != nil {
		return nil, nil, fmt.Errorf("source %s: list tables: %w", e.db.src.Name, err)
	}
	defer rows.Close()
	var tables []Table
	index := map[[2]string]int{}
	for rows.Next() {
		var tb Table
		var typ string
		var n sql.NullInt64
		if err := rows.Scan(&tb.Schema, &tb.Name, &typ, &n); err != nil {
			return nil, nil, err
		}
		if !e.allow.allowed(tb.Schema, tb.Name) {
			continue
		}
		tb.View = typ == "VIEW"
		if n.Valid && !tb.View {
			tb.Rows = &n.Int64
		}
		index[[2]string{tb.Schema, tb.Name}] = len(tables)
		tables = append(tables, tb)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("source %s: list tables: %w", e.db.src.Name, err)
	}
	return tables, index, nil
}

// catalog lists the allowed tables from information_schema.
func (e *myEngine) catalog(ctx context.Context) ([]Table, error) {
	t, err := e.begin(ctx, 0)
	if err != nil {
		return nil, err
	}
	defer t.end()
	tables, index, err := e.listTables(ctx, t)
	if err != nil {
		return nil, err
	}
	if len(tables) == 0 {
		return tables, nil
	}
	rows, err := t.c.QueryContext(ctx, `SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, COLUMN_TYPE, DATA_TYPE FROM information_schema.COLUMNS
		WHERE TABLE_SCHEMA NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys')
		ORDER BY TABLE_SCHEMA, TABLE_NAME, ORDINAL_POSITION`)
	if err != nil {
		return nil, fmt.Errorf("source %s: list columns: %w", e.db.src.Name, err)
	}
	for rows.Next() {
		var schema, table, name, colType, dataType string
		if err := rows.Scan(&schema, &table, &name, &colType, &dataType); err != nil {
			rows.Close()
			return nil, err
		}
		i, ok := index[[2]string{schema, table}]
		if !ok {
			continue
		}
		tables[i].Columns = append(tables[i].Columns, dcColumn(name, myFriendly(dataType), colType))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("source %s: list columns: %w", e.db.src.Name, err)
	}
	sortTables(tables)
	for i := range tables {
		if err := e.samples(ctx, t, &tables[i]); err != nil {
			return nil, err
		}
	}
	return tables, nil
}

func (e *myEngine) samples(ctx context.Context, t *myTx, tb *Table) error {
	if len(tb.Columns) == 0 {
		return nil
	}
	q := e.db.sampleQuery(tb, "NULL", func(col string) string { return fmt.Sprintf("LEFT(CAST(%s AS CHAR), 200)", myIdent(col)) })
	rows, err := t.c.QueryContext(ctx, q)
	if err != nil {
		return fmt.Errorf("source %s: sample %s.%s: %w", e.db.src.Name, tb.Schema, tb.Name, err)
	}
	defer rows.Close()
	return readSamples(rows, tb)
}
