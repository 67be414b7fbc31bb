package dbsource

import (
	"context"
	"fmt"

	"datachat"
)

const pgTablesQuery = `SELECT c.oid, n.nspname, c.relname, c.relkind IN ('v', 'm'), c.reltuples::float8
		FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') AND NOT c.relispartition
		  AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\_%'
		  AND pg_catalog.has_table_privilege(c.oid, 'SELECT')
		ORDER BY n.nspname, c.relname`

func (e *pgEngine) tableNames(ctx context.Context) ([]string, error) {
	t, err := e.begin(ctx)
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

// listTables lists the allowed tables with their OIDs, without columns.
func (e *pgEngine) listTables(ctx context.Context, t *pgTx) ([]Table, []uint32, error) {
	rows, err := t.c.Query(ctx, pgTablesQuery)
	if err != nil {
		return nil, nil, fmt.Errorf("source %s: list tables: %w", e.db.src.Name, err)
	}
	defer rows.Close()
	var tables []Table
	var oids []uint32
	for rows.Next() {
		var (
			oid      uint32
			tb       Table
			reltuple float64
		)
		if err := rows.Scan(&oid, &tb.Schema, &tb.Name, &tb.View, &reltuple); err != nil {
			return nil, nil, err
		}
		if !e.allow.allowed(tb.Schema, tb.Name) {
			continue
		}
		if reltuple >= 0 && !tb.View {
			n := int64(reltuple)
			tb.Rows = &n
		}
		tables = append(tables, tb)
		oids = append(oids, oid)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("source %s: list tables: %w", e.db.src.Name, err)
	}
	return tables, oids, nil
}

// catalog lists the allowed tables from pg_catalog.
func (e *pgEngine) catalog(ctx context.Context) ([]Table, error) {
	t, err := e.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer t.end()
	tables, oids, err := e.listTables(ctx, t)
	if err != nil {
		return nil, err
	}
	if len(tables) == 0 {
		return tables, nil
	}
	byOID := map[uint32]int{}
	for i, o := range oids {
		byOID[o] = i
	}
	rows, err := t.c.Query(ctx, `SELECT a.attrelid, a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), t.typtype, t.typcategory
		FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
		WHERE a.attrelid = ANY($1) AND a.attnum > 0 AND NOT a.attisdropped
		ORDER BY a.attrelid, a.attnum`, oids)
	if err != nil {
		return nil, fmt.Errorf("source %s: list columns: %w", e.db.src.Name, err)
	}
	for rows.Next() {
		var (
			rel                uint32
			name, typ, tt, cat string
		)
		if err := rows.Scan(&rel, &name, &typ, &tt, &cat); err != nil {
			rows.Close()
			return nil, err
		}
		friendly := pgFriendly(typ)
		switch {
		case cat == "A":
			friendly = datachat.TypeList
		case tt == "c":
			friendly = datachat.TypeStruct
		}
		i := byOID[rel]
		tables[i].Columns = append(tables[i].Columns, dcColumn(name, friendly, typ))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("source %s: list columns: %w", e.db.src.Name, err)
	}
	if err := e.foreignKeys(ctx, t, tables, oids, byOID); err != nil {
		return nil, err
	}
	sortTables(tables)
	for i := range tables {
		if err := e.samples(ctx, t, &tables[i]); err != nil {
			return nil, err
		}
	}
	return tables, nil
}

// samples fills up to 3 distinct values per column from the table's first
// SampleRows rows.
func (e *pgEngine) samples(ctx context.Context, t *pgTx, tb *Table) error {
	if len(tb.Columns) == 0 {
		return nil
	}
	q := e.db.sampleQuery(tb, "NULL::pg_catalog.text", func(col string) string {
		return fmt.Sprintf("pg_catalog.left(%s::pg_catalog.text, 200)", pgIdent(col))
	})
	rows, err := t.c.Query(ctx, q)
	if err != nil {
		return fmt.Errorf("source %s: sample %s.%s: %w", e.db.src.Name, tb.Schema, tb.Name, err)
	}
	defer rows.Close()
	return readSamples(rows, tb)
}

// foreignKeys reads the foreign keys of the tables from pg_constraint, each
// to another of the tables (a key to a table not allowed is left out: its
// name is not the model's to see), as join hints.
func (e *pgEngine) foreignKeys(ctx context.Context, t *pgTx, tables []Table, oids []uint32, byOID map[uint32]int) error {
	rows, err := t.c.Query(ctx, `SELECT c.conrelid, c.confrelid,
			ARRAY(SELECT a.attname::pg_catalog.text FROM pg_catalog.unnest(c.conkey) WITH ORDINALITY k(n, i)
				JOIN pg_catalog.pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n ORDER BY k.i),
			ARRAY(SELECT a.attname::pg_catalog.text FROM pg_catalog.unnest(c.confkey) WITH ORDINALITY k(n, i)
				JOIN pg_catalog.pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.n ORDER BY k.i)
		FROM pg_catalog.pg_constraint c
		WHERE c.contype = 'f' AND c.conrelid = ANY($1) AND c.conparentid = 0
		ORDER BY c.conrelid, c.conname`, oids)
	if err != nil {
		return fmt.Errorf("source %s: list foreign keys: %w", e.db.src.Name, err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			rel, ref  uint32
			cols, rcs []string
		)
		if err := rows.Scan(&rel, &ref, &cols, &rcs); err != nil {
			return err
		}
		i, ok := byOID[rel]
		j, rok := byOID[ref]
		if !ok || !rok || len(cols) == 0 || len(cols) != len(rcs) {
			continue
		}
		tables[i].ForeignKeys = append(tables[i].ForeignKeys, ForeignKey{Columns: cols, RefSchema: tables[j].Schema, RefName: tables[j].Name, RefColumns: rcs})
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("source %s: list foreign keys: %w", e.db.src.Name, err)
	}
	return nil
}
