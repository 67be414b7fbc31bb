package dbsource

import (
	"context"
	"database/sql"
	"fmt"
)

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

// listTables lists the allowed tables, without columns, and where each is:
// the tables and views matching --tables, less the views that read with
// their definer's rights and that --tables matches only by a wildcard.
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
		if tb.View && e.definerView(tb.Schema, tb.Name) && !e.namedExactly(tb.Schema, tb.Name) {
			continue // queries may not read it (see myChecker): do not offer it
		}
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
	if err := e.foreignKeys(ctx, t, tables, index); err != nil {
		return nil, err
	}
	sortTables(tables)
	readable := tables[:0]
	for i := range tables {
		err := e.samples(ctx, t, &tables[i])
		switch myNumber(err) {
		case 0:
			if err != nil {
				return nil, err
			}
			readable = append(readable, tables[i])
		case 1356, 1142, 1143:
			// A view the account cannot read through (one reading, with the
			// invoker's rights, a table the account has no grant on): no
			// query can read it, so the prompt does not offer it.
		default:
			return nil, err
		}
	}
	return readable, nil
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

// definerView reports whether schema.table is a view reading with its
// definer's rights, as the last role proof found.
func (e *myEngine) definerView(schema, table string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.definer[[2]string{schema, table}]
}

// foreignKeys reads the foreign keys of the tables from
// information_schema.KEY_COLUMN_USAGE, each to another of the tables (a key
// to a table not allowed is left out), as join hints.
func (e *myEngine) foreignKeys(ctx context.Context, t *myTx, tables []Table, index map[[2]string]int) error {
	rows, err := t.c.QueryContext(ctx, `SELECT TABLE_SCHEMA, TABLE_NAME, CONSTRAINT_NAME, COLUMN_NAME, REFERENCED_TABLE_SCHEMA, REFERENCED_TABLE_NAME, REFERENCED_COLUMN_NAME
		FROM information_schema.KEY_COLUMN_USAGE
		WHERE REFERENCED_TABLE_NAME IS NOT NULL AND TABLE_SCHEMA NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys')
		ORDER BY TABLE_SCHEMA, TABLE_NAME, CONSTRAINT_NAME, ORDINAL_POSITION`)
	if err != nil {
		return fmt.Errorf("source %s: list foreign keys: %w", e.db.src.Name, err)
	}
	defer rows.Close()
	type key struct{ schema, table, name string }
	var last key
	var fk *ForeignKey
	for rows.Next() {
		var k key
		var col, rs, rt, rc string
		if err := rows.Scan(&k.schema, &k.table, &k.name, &col, &rs, &rt, &rc); err != nil {
			return err
		}
		i, ok := index[[2]string{k.schema, k.table}]
		_, rok := index[[2]string{rs, rt}]
		if !ok || !rok {
			continue
		}
		if k != last || fk == nil || fk.RefSchema != rs || fk.RefName != rt {
			tables[i].ForeignKeys = append(tables[i].ForeignKeys, ForeignKey{RefSchema: rs, RefName: rt})
			fk = &tables[i].ForeignKeys[len(tables[i].ForeignKeys)-1]
			last = k
		}
		fk.Columns = append(fk.Columns, col)
		fk.RefColumns = append(fk.RefColumns, rc)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("source %s: list foreign keys: %w", e.db.src.Name, err)
	}
	return nil
}
