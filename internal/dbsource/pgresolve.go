package dbsource

import (
	"context"
	"fmt"
	"strconv"

	pg_query "github.com/pganalyze/pg_query_go/v6"

	"datachat"
)

// pgFacts are what the catalog says of the names a checked statement uses,
// as the session resolves them (see [pgEngine.resolve]).
type pgFacts struct {
	// Relations, one per pgChecked.Relations: where the name resolved
	// (Schema "" when it does not exist), and the partitioned table at the
	// root of its partition tree, if it is a partition.
	Relations []pgRelFact
	// Shadows are functions, field-style calls and operators of the
	// statement's names that the role can use outside pg_catalog and that
	// are user code (not C or internal), with their schema.
	Functions, Fields map[string]string
	Operators         map[string]string
	// Builtin are the operator names pg_catalog holds.
	Builtin map[string]bool
}

// pgRelFact is one relation as the catalog resolves it.
type pgRelFact struct {
	Schema, Name         string
	RootSchema, RootName string
}

// pgResolveQuery resolves a statement's names as the sandbox's session
// does (search_path pg_catalog, then $3): each relation (names $1, $2;
// schema "" for unqualified), functions of names $4 and field-style calls
// of names $5 outside pg_catalog, and operators of names $6.
const pgResolveQuery = `WITH rel AS (
		SELECT r.i, f.oid, f.nspname, f.relname
		FROM ROWS FROM (pg_catalog.unnest($1::text[]), pg_catalog.unnest($2::text[])) WITH ORDINALITY AS r(nsp, name, i)
		LEFT JOIN LATERAL (
			SELECT c.oid, n.nspname, c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
			WHERE c.relname = r.name AND (n.nspname = r.nsp OR r.nsp = '' AND n.nspname IN ('pg_catalog', $3))
			ORDER BY n.nspname = 'pg_catalog' DESC LIMIT 1) f ON true)
	SELECT 'rel', rel.i::text, coalesce(rel.nspname, ''), coalesce(rel.relname, ''), coalesce(rn.nspname, ''), coalesce(rc.relname, '')
	FROM rel LEFT JOIN pg_catalog.pg_class rc ON rc.oid = pg_catalog.pg_partition_root(rel.oid)
	LEFT JOIN pg_catalog.pg_namespace rn ON rn.oid = rc.relnamespace
	UNION ALL
	SELECT CASE WHEN p.proname = ANY($4) THEN 'func' ELSE 'field' END, p.proname, n.nspname, '', '', ''
	FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
	WHERE (p.proname = ANY($4) OR p.proname = ANY($5) AND p.pronargs >= 1 AND p.pronargs - p.pronargdefaults <= 1)
	  AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND pg_catalog.has_schema_privilege(n.oid, 'USAGE')
	  AND EXISTS (` + pgUserCode + `)
	UNION ALL
	SELECT 'op', o.oprname, n.nspname, '', '', ''
	FROM pg_catalog.pg_operator o JOIN pg_catalog.pg_namespace n ON n.oid = o.oprnamespace
	LEFT JOIN pg_catalog.pg_proc p ON p.oid = o.oprcode
	WHERE o.oprname = ANY($6)
	  AND (n.nspname = 'pg_catalog' OR n.nspname <> 'information_schema' AND pg_catalog.has_schema_privilege(n.oid, 'USAGE')
		AND (p.oid IS NULL OR EXISTS (` + pgUserCode + `)))`

// pgUserCode is a subquery with a row when the function p is user code:
// written in a language other than C and internal (which only a superuser
// can use), or an aggregate (whose pg_proc row says internal) with a
// support function that is.
const pgUserCode = `SELECT 1 FROM pg_catalog.pg_proc s JOIN pg_catalog.pg_language sl ON sl.oid = s.prolang
		WHERE sl.lanname NOT IN ('c', 'internal') AND (s.oid = p.oid OR s.oid IN (SELECT pg_catalog.unnest(ARRAY[a.aggtransfn, a.aggfinalfn,
			a.aggcombinefn, a.aggserialfn, a.aggdeserialfn, a.aggmtransfn, a.aggminvtransfn, a.aggmfinalfn]::pg_catalog.oid[])
			FROM pg_catalog.pg_aggregate a WHERE a.aggfnoid = p.oid))`

// resolve reads the catalog's facts about the checked statement's names,
// in the sandbox's transaction (so as the role, with the search path the
// statement will run with), and applies [pgDecide].
func (e *pgEngine) resolve(ctx context.Context, t *pgTx, c *pgChecked) error {
	schemas := make([]string, len(c.Relations))
	names := make([]string, len(c.Relations))
	for i, r := range c.Relations {
		schemas[i], names[i] = r.Schema, r.Name
	}
	rows, err := t.c.Query(ctx, pgResolveQuery, schemas, names, e.defSchema, c.Functions, c.Fields, c.Operators)
	if err != nil {
		return e.classify(ctx, err)
	}
	defer rows.Close()
	f := &pgFacts{Relations: make([]pgRelFact, len(c.Relations)), Functions: map[string]string{}, Fields: map[string]string{},
		Operators: map[string]string{}, Builtin: map[string]bool{}}
	for rows.Next() {
		var kind, a, b, cc, d, ee string
		if err := rows.Scan(&kind, &a, &b, &cc, &d, &ee); err != nil {
			return err
		}
		switch kind {
		case "rel":
			i, _ := strconv.Atoi(a)
			if i >= 1 && i <= len(f.Relations) {
				f.Relations[i-1] = pgRelFact{Schema: b, Name: cc, RootSchema: d, RootName: ee}
			}
		case "func":
			f.Functions[a] = b
		case "field":
			f.Fields[a] = b
		case "op":
			if b == "pg_catalog" {
				f.Builtin[a] = true
			} else {
				f.Operators[a] = b
			}
		}
	}
	if err := rows.Err(); err != nil {
		return e.classify(ctx, err)
	}
	return pgDecide(c, f, e.allow, e.db.allowedTables(ctx))
}

// pgDecide refuses a checked statement whose names the catalog resolves
// to something the sandbox does not allow: a relation outside the allowed
// tables (a partition of an allowed table is allowed) or in the catalog, or
// a function, field-style call or operator that PostgreSQL could take from
// user code instead of pg_catalog. tables are the allowed tables' names,
// for the hint of an unknown one.
func pgDecide(c *pgChecked, f *pgFacts, allow allowList, tables []string) error {
	for i, r := range c.Relations {
		got := f.Relations[i]
		name := r.Name
		if r.Schema != "" {
			name = r.Schema + "." + r.Name
		}
		switch {
		case got.Schema == "":
			return &datachat.QueryError{Kind: datachat.KindUnknownTable,
				Message: fmt.Sprintf("relation %q does not exist%s", name, candidates(name, tables))}
		case pgSystemSchema(got.Schema):
			return pgCatalogRefusal(got.Schema, got.Name)
		case allow.allowed(got.Schema, got.Name), got.RootName != "" && allow.allowed(got.RootSchema, got.RootName):
		default:
			return refusedf("table %s.%s is not one of the source's allowed tables%s", got.Schema, got.Name, candidates(got.Name, tables))
		}
	}
	for _, fn := range c.Functions {
		if s, ok := f.Functions[fn]; ok {
			return refusedf("function %s is not allowed: a function of that name is defined in schema %s, and PostgreSQL could call it instead of the built-in; queries may call only PostgreSQL's built-in functions", fn, s)
		}
	}
	for _, fn := range c.Fields {
		if s, ok := f.Fields[fn]; ok {
			return refusedf("x.%s is not allowed: where x has no column %s, PostgreSQL calls the function %s.%s(x), which is not a built-in; name a column that exists", fn, fn, s, fn)
		}
	}
	for _, op := range c.Operators {
		if s, ok := f.Operators[op]; ok {
			return refusedf("operator %s is not allowed: an operator of that name is defined in schema %s, and PostgreSQL could use it instead of the built-in; queries may use only PostgreSQL's built-in operators", op, s)
		}
		if !f.Builtin[op] {
			return refusedf("operator %s is not allowed: it is not one of PostgreSQL's built-in operators", op)
		}
	}
	return nil
}

// pgCheckWrap proves that wrapped, our row cap around the checked
// statement sql, parses as exactly that: SELECT * FROM (sql) AS
// datachat_result LIMIT limit, nothing more.
func pgCheckWrap(wrapped, sql string, limit int) error {
	tree, err := pg_query.Parse(wrapped)
	if err != nil {
		return err
	}
	if len(tree.Stmts) != 1 {
		return fmt.Errorf("%d statements", len(tree.Stmts))
	}
	s := tree.Stmts[0].GetStmt().GetSelectStmt()
	if s == nil || s.Op != pg_query.SetOperation_SETOP_NONE || s.WithClause != nil || s.IntoClause != nil ||
		len(s.DistinctClause) > 0 || s.WhereClause != nil || len(s.GroupClause) > 0 || s.HavingClause != nil ||
		len(s.WindowClause) > 0 || len(s.ValuesLists) > 0 || len(s.SortClause) > 0 || s.LimitOffset != nil ||
		len(s.LockingClause) > 0 || len(s.TargetList) != 1 || len(s.FromClause) != 1 {
		return fmt.Errorf("not the row cap's shape")
	}
	star := s.TargetList[0].GetResTarget().GetVal().GetColumnRef()
	if star == nil || len(star.Fields) != 1 || star.Fields[0].GetAStar() == nil {
		return fmt.Errorf("not SELECT *")
	}
	if n := s.LimitCount.GetAConst(); n == nil || n.GetIval() == nil || int(n.GetIval().Ival) != limit {
		return fmt.Errorf("not LIMIT %d", limit)
	}
	sub := s.FromClause[0].GetRangeSubselect()
	if sub == nil || sub.Lateral || sub.Alias.GetAliasname() != "datachat_result" || len(sub.Alias.GetColnames()) > 0 {
		return fmt.Errorf("not FROM (…) AS datachat_result")
	}
	inner, err := pg_query.Deparse(&pg_query.ParseResult{Version: tree.Version, Stmts: []*pg_query.RawStmt{{Stmt: sub.Subquery}}})
	if err != nil {
		return err
	}
	if inner != sql {
		return fmt.Errorf("the subquery prints otherwise")
	}
	return nil
}
