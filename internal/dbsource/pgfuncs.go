package dbsource

import "strings"

// pgFunctions are the functions a PostgreSQL query may call: built-ins of
// schema pg_catalog that compute a value from their arguments and nothing
// else. None reads a table, a file, a setting or another session; none runs
// SQL given as text, sleeps, signals, locks, writes, notifies, uses a
// sequence or a large object, or connects anywhere. Every name here is
// PostgreSQL's own (TestPgFunctionsAreBuiltIn checks each against a real
// server's pg_catalog); a function of the same name in another schema the
// role can use refuses the query (see [pgEngine.resolve]), since PostgreSQL
// could pick it instead. A name missing here is refused: the list is an
// allow-list, and what it leaves out (the settings, file, lock, sleep,
// signal, XML, text-search-statistics, large-object, sequence, replication,
// statistics and administration functions, and any not listed) cannot be
// called. Names the grammar itself writes for SQL syntax (EXTRACT, AT TIME
// ZONE, OVERLAPS, TRIM, SUBSTRING … FROM, POSITION … IN, SIMILAR TO,
// COLLATION FOR, NORMALIZE) are listed too.
var pgFunctions = setOf(
	// Mathematics.
	`abs cbrt ceil ceiling degrees div exp factorial floor gcd lcm ln log log10 min_scale mod pi power
	radians round scale sign sqrt trim_scale trunc width_bucket random random_normal
	acos acosd asin asind atan atand atan2 atan2d cos cosd cot cotd sin sind tan tand
	sinh cosh tanh asinh acosh atanh erf erfc numeric float4 float8 int2 int4 int8`,
	// Strings and binary strings.
	`ascii bit_length btrim char_length character_length chr concat concat_ws format initcap left length
	lower lpad ltrim md5 normalize is_normalized octet_length overlay position quote_ident quote_literal
	quote_nullable regexp_count regexp_instr regexp_like regexp_match regexp_matches regexp_replace
	regexp_split_to_array regexp_split_to_table regexp_substr repeat replace reverse right rpad rtrim
	split_part starts_with strpos substr substring to_ascii to_hex translate unistr upper like_escape
	string_to_array string_to_table array_to_string convert convert_from convert_to encode decode
	sha224 sha256 sha384 sha512 get_bit get_byte bit_count parse_ident similar_to_escape text
	casefold`,
	// Aggregates, ordered-set and window functions.
	`count sum avg min max array_agg string_agg bool_and bool_or every bit_and bit_or bit_xor
	stddev stddev_pop stddev_samp variance var_pop var_samp corr covar_pop covar_samp
	regr_avgx regr_avgy regr_count regr_intercept regr_r2 regr_slope regr_sxx regr_sxy regr_syy
	mode percentile_cont percentile_disc json_agg jsonb_agg json_object_agg jsonb_object_agg
	json_agg_strict jsonb_agg_strict json_object_agg_strict jsonb_object_agg_strict
	json_object_agg_unique jsonb_object_agg_unique json_object_agg_unique_strict jsonb_object_agg_unique_strict
	any_value range_agg range_intersect_agg
	row_number rank dense_rank percent_rank cume_dist ntile lag lead first_value last_value nth_value`,
	// Dates and times.
	`age clock_timestamp date_bin date_part date_trunc extract isfinite justify_days justify_hours
	justify_interval make_date make_interval make_time make_timestamp make_timestamptz now
	statement_timestamp timeofday transaction_timestamp to_timestamp to_date to_char to_number timezone
	overlaps date_add date_subtract date`,
	// Conditionals and comparison.
	`num_nulls num_nonnulls`,
	// Arrays.
	`array_append array_cat array_dims array_fill array_length array_lower array_ndims array_position
	array_positions array_prepend array_remove array_replace array_upper cardinality trim_array unnest
	array_sample array_shuffle array_reverse array_sort generate_series generate_subscripts`,
	// JSON (jsonpath runs no SQL: its methods and like_regex are built in).
	`to_json to_jsonb array_to_json row_to_json json_build_array jsonb_build_array json_build_object
	jsonb_build_object json_object jsonb_object json_array_length jsonb_array_length json_array_elements
	jsonb_array_elements json_array_elements_text jsonb_array_elements_text json_each jsonb_each
	json_each_text jsonb_each_text json_extract_path jsonb_extract_path json_extract_path_text
	jsonb_extract_path_text json_object_keys jsonb_object_keys json_populate_record jsonb_populate_record
	json_populate_recordset jsonb_populate_recordset json_to_record jsonb_to_record json_to_recordset
	jsonb_to_recordset json_strip_nulls jsonb_strip_nulls json_typeof jsonb_typeof jsonb_set jsonb_set_lax
	jsonb_insert jsonb_pretty jsonb_path_exists jsonb_path_match jsonb_path_query jsonb_path_query_array
	jsonb_path_query_first jsonb_path_exists_tz jsonb_path_match_tz jsonb_path_query_tz
	jsonb_path_query_array_tz jsonb_path_query_first_tz`,
	// Ranges.
	`lower_inc upper_inc lower_inf upper_inf isempty range_merge multirange int4range int8range numrange
	daterange tsrange tstzrange`,
	// Text search (not ts_stat or ts_rewrite, which run SQL given as text).
	`to_tsvector to_tsquery plainto_tsquery phraseto_tsquery websearch_to_tsquery ts_rank ts_rank_cd
	ts_headline setweight strip tsvector_to_array array_to_tsvector numnode querytree ts_delete ts_filter
	json_to_tsvector jsonb_to_tsvector`,
	// Network addresses.
	`abbrev broadcast family host hostmask inet_merge inet_same_family masklen netmask network set_masklen`,
	// Identifiers, types and sizes of values (no catalog or server state).
	`gen_random_uuid uuidv4 uuidv7 pg_typeof pg_column_size pg_size_pretty pg_size_bytes pg_collation_for
	current_database`,
)

func setOf(groups ...string) map[string]bool {
	m := map[string]bool{}
	for _, g := range groups {
		for _, name := range strings.Fields(g) {
			m[name] = true
		}
	}
	return m
}

// pgFunctionRefusal says why a function is not allowed: for the classes an
// attacker reaches for, what the function would do; for any other, that it
// is not on the list.
func pgFunctionRefusal(name string) string {
	switch {
	case strings.HasSuffix(name, "_to_xml"), strings.HasSuffix(name, "_to_xmlschema"),
		strings.HasSuffix(name, "_to_xml_and_xmlschema"), name == "ts_stat", name == "ts_rewrite", name == "xpath_table",
		name == "crosstab", strings.HasPrefix(name, "crosstab"), name == "connectby":
		return "it runs SQL given as text, which the sandbox cannot check"
	case strings.HasPrefix(name, "pg_read_"), strings.HasPrefix(name, "pg_ls_"), name == "pg_stat_file",
		strings.HasPrefix(name, "pg_file_"), strings.HasPrefix(name, "pg_current_logfile"), name == "pg_logdir_ls":
		return "it reads or writes the server's files"
	case strings.HasPrefix(name, "lo_"), name == "loread", name == "lowrite":
		return "it reads or writes large objects"
	case strings.HasPrefix(name, "dblink"), strings.HasPrefix(name, "postgres_fdw"):
		return "it connects to other servers"
	case name == "set_config", name == "current_setting", name == "pg_reload_conf", name == "setseed":
		return "it reads or changes the server's or the session's settings"
	case name == "pg_terminate_backend", name == "pg_cancel_backend", strings.HasPrefix(name, "pg_signal"),
		name == "pg_log_backend_memory_contexts":
		return "it signals other sessions"
	case strings.Contains(name, "advisory"):
		return "it takes advisory locks"
	case strings.HasPrefix(name, "pg_sleep"):
		return "it sleeps; a query may only compute"
	case name == "pg_notify":
		return "it sends notifications"
	case name == "nextval", name == "setval", name == "currval", name == "lastval":
		return "it uses a sequence"
	case strings.HasPrefix(name, "txid_"), strings.HasPrefix(name, "pg_current_xact"), strings.HasPrefix(name, "pg_snapshot"):
		return "it reads the server's transaction state"
	case strings.Contains(name, "replication"), strings.Contains(name, "_wal"), strings.HasPrefix(name, "pg_logical"),
		strings.HasPrefix(name, "pg_backup"), strings.HasPrefix(name, "pg_promote"):
		return "it is one of the server's replication or backup functions"
	case strings.HasPrefix(name, "pg_stat"), strings.HasPrefix(name, "pg_get_"), strings.HasPrefix(name, "has_"),
		strings.HasPrefix(name, "pg_has_"), strings.HasPrefix(name, "to_reg"), strings.HasSuffix(name, "_is_visible"):
		return "it reads the server's catalog or statistics, which queries may not read"
	case strings.HasPrefix(name, "xml"), name == "xpath", name == "xpath_exists":
		return "XML functions are not supported"
	case strings.HasPrefix(name, "pg_"):
		return "it is one of PostgreSQL's administration functions"
	}
	return "it is not one of the built-in functions queries may call (arithmetic, text, date, array, JSON, range, text search and aggregate functions)"
}

// pgTypes are the types a query may cast to: PostgreSQL's built-in base,
// range and multirange types of pg_catalog, by the name the parser gives
// them. A domain or a type of another schema may run its own code on a
// cast (a CHECK constraint, an input function), and the reg* types read
// the catalog: a cast to any of these is refused.
var pgTypes = setOf(
	`bool int2 int4 int8 numeric float4 float8 money text varchar bpchar char name bytea bit varbit
	date time timetz timestamp timestamptz interval uuid json jsonb jsonpath inet cidr macaddr macaddr8
	tsvector tsquery regconfig point line lseg box path polygon circle pg_lsn oid
	int4range int8range numrange daterange tsrange tstzrange
	int4multirange int8multirange nummultirange datemultirange tsmultirange tstzmultirange`,
)
