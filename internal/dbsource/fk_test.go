package dbsource_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"testing"

	"datachat/internal/dbsource"
	"datachat/internal/dbsource/dbsourcetest"
)

// TestForeignKeys: the catalog gives each allowed table's foreign keys to
// other allowed tables, composite ones with their columns in order, as join
// hints; a key to a table the source may not read is left out (its name is
// not the model's to see). On PostgreSQL and MariaDB.
func TestForeignKeys(t *testing.T) {
	schema := []string{
		"CREATE TABLE customers (id int PRIMARY KEY, name text)",
		"CREATE TABLE regions (country char(2), code int, PRIMARY KEY (country, code))",
		"CREATE TABLE secret_notes (id int PRIMARY KEY)",
		`CREATE TABLE orders (id int PRIMARY KEY, customer_id int REFERENCES customers (id),
			country char(2), region_code int, note_id int REFERENCES secret_notes (id),
			FOREIGN KEY (country, region_code) REFERENCES regions (country, code))`,
	}
	check := func(t *testing.T, db *dbsource.DB, schema string) {
		tables, err := db.Catalog(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, tb := range tables {
			got[tb.Name] = fmt.Sprint(tb.ForeignKeys)
		}
		want := fmt.Sprintf("[{[customer_id] %s customers [id]} {[country region_code] %s regions [country code]}]", schema, schema)
		if got["orders"] != want {
			t.Errorf("orders' foreign keys %s, want %s", got["orders"], want)
		}
		if got["customers"] != "[]" || got["regions"] != "[]" {
			t.Errorf("foreign keys %v, want none but orders'", got)
		}
	}
	t.Run("PostgreSQL", func(t *testing.T) {
		pg := dbsourcetest.NewPostgresDB(t, "dcfk")
		pg.Exec(t, append(schema, "GRANT USAGE ON SCHEMA public TO "+pg.Role, "GRANT SELECT ON customers, regions, orders TO "+pg.Role)...)
		db := openSource(t, "shop", pg.URL(), []string{"public.customers", "public.regions", "public.orders"}, dbsource.Options{})
		check(t, db, "public")
	})
	t.Run("MariaDB", func(t *testing.T) {
		raw := dbsourcetest.MySQLURL(t)
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		sfx := dbsourcetest.Suffix()
		dbName, user, pw := "dcfk_"+sfx, "dcfk_reader_"+sfx, "pw-"+sfx
		admin, err := sql.Open("mysql", dbsourcetest.MySQLAdminDSN(u))
		if err != nil {
			t.Fatal(err)
		}
		defer admin.Close()
		t.Cleanup(func() {
			a, _ := sql.Open("mysql", dbsourcetest.MySQLAdminDSN(u))
			a.Exec("DROP DATABASE IF EXISTS " + dbName)
			a.Exec(fmt.Sprintf("DROP USER IF EXISTS '%s'@'127.0.0.1'", user))
			a.Close()
		})
		stmts := []string{"CREATE DATABASE " + dbName, "USE " + dbName}
		stmts = append(stmts, schema...)
		stmts = append(stmts, fmt.Sprintf("CREATE USER '%s'@'127.0.0.1' IDENTIFIED BY '%s'", user, pw))
		for _, tb := range []string{"customers", "regions", "orders"} {
			stmts = append(stmts, fmt.Sprintf("GRANT SELECT ON %s.%s TO '%s'@'127.0.0.1'", dbName, tb, user))
		}
		conn, err := admin.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		for _, q := range stmts {
			if _, err := conn.ExecContext(context.Background(), q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		db := openSource(t, "shop", dbsourcetest.WithDB(raw, dbName, user, pw), []string{dbName + ".customers", dbName + ".regions", dbName + ".orders"}, dbsource.Options{})
		check(t, db, dbName)
	})
}
