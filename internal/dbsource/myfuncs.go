package dbsource

import (
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
)

// The functions a MySQL/MariaDB source query may call: an allow-list, so
// that a function nobody thought about (a new built-in, a loadable UDF, a
// stored function) is refused rather than run.
//
// Policy: a built-in is allowed when its value depends only on its arguments
// (and, for the clock and RAND, on nothing a query can change), it has no
// effect outside the statement, and the server it is allowed on knows it
// under the spelling the checker restores. So the list has the usual
// string, number, date, JSON, XML, hash, network-address, aggregate and
// window functions, and refuses, among others: SLEEP and BENCHMARK (they
// only spend the server's time), the lock functions (a lock outlives the
// query), LOAD_FILE (the server's files), the replication waits,
// LAST_INSERT_ID/ROW_COUNT/FOUND_ROWS (the session's state), NAME_CONST,
// UUID/UUID_SHORT/SYS_GUID (a UUID shows the server's MAC address;
// UUID_SHORT moves a server-wide counter), the information functions (USER,
// DATABASE, VERSION, CONNECTION_ID…: the session and server, not the data),
// sequences (NEXTVAL…), and every stored or loadable function (db.f(), or
// any name not listed). The XML functions are allowed: what their errors
// echo is handled by the error classification (myerrors.go), which keeps a
// server message from a query only when it cannot carry data.

// myFunc is an allowed function: how the restored SQL spells it and which
// servers know it.
type myFunc struct {
	name    string // as the restored SQL writes it (upper case; the parser's key may differ)
	servers uint8  // myOnMariaDB, myOnMySQL or both
}

const (
	myOnMariaDB uint8 = 1 << iota
	myOnMySQL
	myOnBoth = myOnMariaDB | myOnMySQL
)

// funcList makes allow-list entries from the parser's lower-case names,
// spelt as their upper case.
func funcList(servers uint8, names string, into map[string]myFunc) {
	for _, n := range strings.Fields(names) {
		into[n] = myFunc{name: strings.ToUpper(n), servers: servers}
	}
}

// myScalarFuncs are the allowed scalar functions, by the TiDB parser's
// lower-case name (FuncCallExpr.FnName.L).
var myScalarFuncs = func() map[string]myFunc {
	m := map[string]myFunc{}
	// Control flow.
	funcList(myOnBoth, "if ifnull nullif coalesce greatest least isnull interval", m)
	// Strings. CHAR(… USING …) is the parser's char_func, rewritten by the
	// checker; INSERT(…) is its insert_func.
	funcList(myOnBoth, `ascii bin bit_length char_length character_length concat concat_ws elt export_set field
		find_in_set format from_base64 to_base64 hex unhex instr lcase lower ucase upper left right length
		octet_length locate position lpad rpad ltrim rtrim trim make_set mid substr substring substring_index
		oct ord quote repeat replace reverse space strcmp soundex regexp_replace regexp_instr regexp_substr
		convert charset collation coercibility`, m)
	m[ast.InsertFunc] = myFunc{name: "INSERT", servers: myOnBoth}
	m[ast.CharFunc] = myFunc{name: "CHAR", servers: myOnBoth}
	funcList(myOnMySQL, "regexp_like", m)
	// Numbers.
	funcList(myOnBoth, `abs acos asin atan atan2 ceil ceiling conv cos cot crc32 degrees exp floor ln log log2
		log10 pi pow power radians rand round sign sin sqrt tan truncate bit_count`, m)
	// Dates and times, and the literals DATE '…', TIME '…', TIMESTAMP '…'.
	funcList(myOnBoth, `adddate addtime convert_tz curdate current_date current_time current_timestamp curtime
		date date_add date_format date_sub datediff day dayname dayofmonth dayofweek dayofyear extract
		from_days from_unixtime get_format hour localtime localtimestamp makedate maketime microsecond minute
		month monthname now period_add period_diff quarter sec_to_time second str_to_date subdate subtime
		sysdate time time_format time_to_sec timediff timestamp timestampadd timestampdiff to_days to_seconds
		unix_timestamp utc_date utc_time utc_timestamp week weekday weekofyear year yearweek last_day`, m)
	for _, lit := range []string{ast.DateLiteral, ast.TimeLiteral, ast.TimestampLiteral} {
		m[lit] = myFunc{name: lit, servers: myOnBoth} // restored as DATE '…' whatever its name
	}
	// JSON.
	funcList(myOnBoth, `json_type json_extract json_unquote json_array json_object json_merge json_set json_insert
		json_replace json_remove json_overlaps json_contains json_contains_path json_valid json_array_append
		json_array_insert json_merge_patch json_merge_preserve json_quote json_search json_depth json_keys
		json_length json_value json_pretty`, m)
	funcList(myOnMySQL, "json_memberof json_storage_size json_schema_valid", m)
	funcList(myOnMariaDB, "json_detailed json_compact json_loose json_exists json_query json_equals json_normalize", m)
	// XML, hashes, network addresses.
	funcList(myOnBoth, "extractvalue updatexml md5 sha sha1 sha2", m)
	funcList(myOnBoth, "inet_aton inet_ntoa inet6_aton inet6_ntoa is_ipv4 is_ipv4_compat is_ipv4_mapped is_ipv6", m)
	funcList(myOnMySQL, "any_value uuid_to_bin bin_to_uuid is_uuid", m)
	// MariaDB's own.
	funcList(myOnMariaDB, "nvl nvl2 natural_sort_key", m)
	return m
}()

// myAggregates are the allowed aggregate functions, by AggregateFuncExpr.F
// lower-cased. The parser reads STD and STDDEV as stddev_pop, VARIANCE as
// var_pop.
var myAggregates = func() map[string]myFunc {
	m := map[string]myFunc{}
	funcList(myOnBoth, `count sum avg max min group_concat bit_and bit_or bit_xor var_pop var_samp stddev_pop
		stddev_samp json_arrayagg json_objectagg`, m)
	return m
}()

// myWindowFuncs are the allowed window functions (WindowFuncExpr.Name
// lower-cased): the ranking and value functions, and aggregates over a
// window.
var myWindowFuncs = func() map[string]myFunc {
	m := map[string]myFunc{}
	funcList(myOnBoth, `row_number rank dense_rank cume_dist percent_rank ntile lead lag first_value last_value
		nth_value count sum avg max min bit_and bit_or bit_xor var_pop var_samp stddev_pop stddev_samp`, m)
	return m
}()

// myDeniedWhy says why some well-known functions are refused; any other
// function missing from the allow-list gets the general reason.
var myDeniedWhy = func() map[string]string {
	m := map[string]string{}
	set := func(why, names string) {
		for _, n := range strings.Fields(names) {
			m[n] = why
		}
	}
	set("it only spends the server's time", "sleep benchmark")
	set("it takes, frees or reads a lock that outlives the query", "get_lock release_lock release_all_locks is_free_lock is_used_lock")
	set("it reads the server's files", "load_file")
	set("it waits on replication", "master_pos_wait source_pos_wait master_gtid_wait wait_for_executed_gtid_set wait_until_sql_thread_after_gtids")
	set("it reads or changes the session's state", "last_insert_id row_count found_rows getvar setvar")
	set("it makes a column name from text", "name_const")
	set("it reads or moves server state (a version-1 UUID carries the server's network address; UUID_SHORT moves a server-wide counter)", "uuid uuid_short uuid_v4 uuid_v7 sys_guid")
	set("it reports the session or the server, not the data", "user current_user session_user system_user database schema version connection_id current_role")
	set("it reads or changes a sequence", "nextval setval lastval")
	set("it is not a function of the data", "password encrypt des_encrypt des_decrypt aes_encrypt aes_decrypt random_bytes compress uncompress uncompressed_length validate_password_strength default_func values")
	set("it runs programs on the server", "sys_exec sys_eval")
	return m
}()

// myServerName names a server flavour for messages.
func myServerName(mariadb bool) string {
	if mariadb {
		return "MariaDB"
	}
	return "MySQL"
}
