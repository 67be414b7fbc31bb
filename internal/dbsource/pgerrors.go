package dbsource

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"datachat"
)

// classify turns an error of PostgreSQL, running a statement the sandbox
// built, into a *datachat.QueryError. It reads only the SQLSTATE, never the
// message, to decide: the message itself goes back only for errors that
// cannot carry data — class 42 (syntax, an unknown or ambiguous table,
// column, function or type, permission denied: PostgreSQL's analysis of the
// statement's own names) and 3F000 (no such schema). A timeout, a cancel or
// a lock timeout gets our own message. Any other error (a data exception of
// class 22, which may quote the value that failed; a RAISE, P0001; an
// internal error, XX000; anything unknown) gets a generic message naming the
// SQLSTATE and its condition and saying what to do. Positions are not
// given: the statement PostgreSQL saw is the deparsed one.
func (e *pgEngine) classify(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return fmt.Errorf("source %s: %w", e.db.src.Name, err)
	}
	code := pe.Code
	switch {
	case strings.HasPrefix(code, "42"), code == "3F000":
		return e.nameError(ctx, pe)
	case code == "57014": // query_canceled: ctx is not done, so the server's timeout
		return &datachat.QueryError{Kind: datachat.KindTimeout, Message: fmt.Sprintf(
			"the query ran past the source's %v statement timeout; make it lighter: filter or aggregate on indexed columns, or add LIMIT", e.db.opts.Timeout)}
	case code == "55P03":
		return &datachat.QueryError{Kind: datachat.KindTimeout, Message: fmt.Sprintf(
			"the query waited more than the source's %v for a lock another session holds; try again later", e.db.opts.Timeout)}
	case code == "25006":
		return refusedf("the statement would write, and sources are read-only (SQLSTATE 25006, read_only_sql_transaction)")
	}
	name, advice := pgCondition(code)
	kind := datachat.KindOther
	switch {
	case code == "22P02" || code == "22007" || code == "22008" || code == "22003" || code == "22018" || code == "22P03" || code == "2200G":
		kind = datachat.KindTypeMismatch
	case strings.HasPrefix(code, "53") || strings.HasPrefix(code, "54"):
		kind = datachat.KindMemory
	}
	return &datachat.QueryError{Kind: kind, Message: fmt.Sprintf(
		"the query failed in PostgreSQL with SQLSTATE %s (%s): %s (the database's own message is not shown: a message of this kind can quote the data)",
		code, name, advice)}
}

// nameError is an error about the statement's own names, with PostgreSQL's
// message, detail and hint, and the allowed tables for an unknown one.
func (e *pgEngine) nameError(ctx context.Context, pe *pgconn.PgError) error {
	msg := pe.Message
	if pe.Detail != "" {
		msg += "; " + pe.Detail
	}
	if pe.Hint != "" {
		msg += "; hint: " + pe.Hint
	}
	kind := datachat.KindOther
	switch pe.Code {
	case "42601", "42P02":
		kind = datachat.KindSyntax
	case "42P01":
		kind = datachat.KindUnknownTable
		msg += candidates(quotedIn(pe.Message, `"`), e.db.allowedTables(ctx))
	case "3F000":
		kind = datachat.KindUnknownTable
		msg += candidates("", e.db.allowedTables(ctx))
	case "42703", "42702":
		kind = datachat.KindUnknownColumn
	case "42804", "42846", "42725", "42P18", "42883":
		kind = datachat.KindTypeMismatch
	case "42501":
		kind = datachat.KindRefused
		msg += " (the source's role may read only the allowed tables)"
	}
	return &datachat.QueryError{Kind: kind, Message: msg}
}

// pgCondition names a SQLSTATE as PostgreSQL's errcodes do (the condition
// name of PL/pgSQL), with what the model should do about it.
func pgCondition(code string) (name, advice string) {
	if c, ok := pgConditions[code]; ok {
		return c[0], c[1]
	}
	if len(code) == 5 {
		if c, ok := pgConditions[code[:2]+"000"]; ok {
			return c[0], c[1]
		}
	}
	return "an error PostgreSQL does not name here", "rewrite the query more simply, or ask the user"
}

const (
	adviceValue = "a value did not fit what the query does with it; check the casts, the formats of dates and numbers, and the arithmetic"
	adviceJSON  = "a JSON value or path did not fit; check the JSON paths and the types the query expects"
)

// pgConditions are the SQLSTATEs a query may meet, by code: the condition
// name and what to do. A class's x000 code stands for the class.
var pgConditions = map[string][2]string{
	"0A000": {"feature_not_supported", "PostgreSQL does not support what the query asks; write it another way"},
	"21000": {"cardinality_violation", "a subquery used as a value returned more than one row; add LIMIT 1, aggregate it, or use IN or EXISTS"},
	"22000": {"data_exception", adviceValue},
	"2202E": {"array_subscript_error", "an array subscript is out of range; check the array bounds"},
	"22021": {"character_not_in_repertoire", "a text value holds a character the encoding cannot hold"},
	"22008": {"datetime_field_overflow", "a date or time is out of range; check the date arithmetic and formats"},
	"22012": {"division_by_zero", "the query divides by zero; divide by NULLIF(x, 0) instead"},
	"22015": {"interval_field_overflow", "an interval is out of range"},
	"2201E": {"invalid_argument_for_logarithm", "a logarithm of zero or of a negative number; filter those values out"},
	"22014": {"invalid_argument_for_ntile_function", "ntile() needs a positive bucket count"},
	"22016": {"invalid_argument_for_nth_value_function", "nth_value() needs a positive position"},
	"2201F": {"invalid_argument_for_power_function", "power() of these values is undefined; filter them out"},
	"2201G": {"invalid_argument_for_width_bucket_function", "width_bucket() needs a valid range and a positive count"},
	"22018": {"invalid_character_value_for_cast", adviceValue},
	"22007": {"invalid_datetime_format", "a text value is not a date or time in the format the query assumes; check the format (to_date, to_timestamp) or filter the values"},
	"22019": {"invalid_escape_character", "the ESCAPE of a LIKE or SIMILAR TO is not one character"},
	"22025": {"invalid_escape_sequence", "a LIKE pattern ends with its escape character"},
	"22023": {"invalid_parameter_value", "a function was given an argument it does not accept; check the arguments"},
	"22013": {"invalid_preceding_or_following_size", "a window frame's offset is negative or null"},
	"2201B": {"invalid_regular_expression", "a regular expression of the query is invalid; fix its syntax"},
	"2201W": {"invalid_row_count_in_limit_clause", "LIMIT must be a non-negative number"},
	"2201X": {"invalid_row_count_in_result_offset_clause", "OFFSET must be a non-negative number"},
	"2202H": {"invalid_tablesample_argument", "TABLESAMPLE takes a percentage from 0 to 100"},
	"2202G": {"invalid_tablesample_repeat", "TABLESAMPLE's REPEATABLE seed must not be null"},
	"22009": {"invalid_time_zone_displacement_value", "a time zone offset is out of range"},
	"2200G": {"most_specific_type_mismatch", adviceValue},
	"22004": {"null_value_not_allowed", "a function was given NULL where it needs a value; filter the nulls or use COALESCE"},
	"22003": {"numeric_value_out_of_range", "a number is too large for its type; cast to numeric or bigint before the arithmetic"},
	"22026": {"string_data_length_mismatch", adviceValue},
	"22001": {"string_data_right_truncation", "a text value is longer than the type the query casts it to; cast to text instead"},
	"22011": {"substring_error", "a substring's start or length is invalid"},
	"22027": {"trim_error", "TRIM's characters to remove must be one character"},
	"22P01": {"floating_point_exception", "a floating-point operation is undefined for these values"},
	"22P02": {"invalid_text_representation", "a text value is not in the format of the type the query casts it to (a number, a boolean, a uuid…); cast only the values that fit, e.g. with a CASE or a regular expression, or compare as text"},
	"22P03": {"invalid_binary_representation", adviceValue},
	"22P05": {"untranslatable_character", "a text value holds a character the conversion cannot translate"},
	"22030": {"duplicate_json_object_key_value", adviceJSON},
	"22031": {"invalid_argument_for_sql_json_datetime_function", adviceJSON},
	"22032": {"invalid_json_text", "a text value is not valid JSON; cast only the values that are"},
	"22033": {"invalid_sql_json_subscript", adviceJSON},
	"22034": {"more_than_one_sql_json_item", adviceJSON},
	"22035": {"no_sql_json_item", adviceJSON},
	"22036": {"non_numeric_sql_json_item", adviceJSON},
	"22037": {"non_unique_keys_in_a_json_object", adviceJSON},
	"22038": {"singleton_sql_json_item_required", adviceJSON},
	"22039": {"sql_json_array_not_found", adviceJSON},
	"2203A": {"sql_json_member_not_found", adviceJSON},
	"2203B": {"sql_json_number_not_found", adviceJSON},
	"2203C": {"sql_json_object_not_found", adviceJSON},
	"2203D": {"too_many_json_array_elements", adviceJSON},
	"2203E": {"too_many_json_object_members", adviceJSON},
	"2203F": {"sql_json_scalar_required", adviceJSON},
	"2203G": {"sql_json_item_cannot_be_cast_to_target_type", adviceJSON},
	"23000": {"integrity_constraint_violation", "the query cannot write; sources are read-only"},
	"25000": {"invalid_transaction_state", "the query cannot change the transaction; send only the query"},
	"2F000": {"sql_routine_exception", "a function failed; rewrite the query without it"},
	"38000": {"external_routine_exception", "a function failed; rewrite the query without it"},
	"39000": {"external_routine_invocation_exception", "a function failed; rewrite the query without it"},
	"40000": {"transaction_rollback", "the database rolled the query back; try again"},
	"40001": {"serialization_failure", "the query conflicted with another transaction; try again"},
	"40P01": {"deadlock_detected", "the query was chosen to end a deadlock; try again"},
	"53000": {"insufficient_resources", "the database ran short of resources; make the query lighter (filter first, aggregate, LIMIT)"},
	"53100": {"disk_full", "the database's disk is full; make the query lighter (less sorting and hashing), or tell the user"},
	"53200": {"out_of_memory", "the database ran out of memory; make the query lighter (filter first, aggregate, LIMIT)"},
	"53300": {"too_many_connections", "the database has no connection free; try again later"},
	"54000": {"program_limit_exceeded", "the query exceeds one of PostgreSQL's limits (nesting, row size); write it more simply"},
	"54001": {"statement_too_complex", "the query is too complex for PostgreSQL; write it more simply"},
	"54011": {"too_many_columns", "the query selects too many columns; select fewer"},
	"54023": {"too_many_arguments", "a function was given too many arguments"},
	"55000": {"object_not_in_prerequisite_state", "the database cannot do this now; write the query another way"},
	"57000": {"operator_intervention", "the database's operator stopped the query; try again later"},
	"57P01": {"admin_shutdown", "the database is shutting down; try again later"},
	"58000": {"system_error", "the database server failed; try again later"},
	"72000": {"snapshot_too_old", "the query ran too long for the database's snapshot; make it lighter"},
	"P0000": {"plpgsql_error", "a function of the database failed; rewrite the query without it"},
	"P0001": {"raise_exception", "a function of the database raised an error; rewrite the query without it"},
	"P0002": {"no_data_found", "a function of the database found no data; rewrite the query without it"},
	"P0003": {"too_many_rows", "a function of the database found too many rows; rewrite the query without it"},
	"P0004": {"assert_failure", "a function of the database failed an assertion; rewrite the query without it"},
	"XX000": {"internal_error", "PostgreSQL failed internally; write the query another way, or tell the user"},
	"XX001": {"data_corrupted", "PostgreSQL found corrupted data; tell the user"},
	"XX002": {"index_corrupted", "PostgreSQL found a corrupted index; tell the user"},
}
