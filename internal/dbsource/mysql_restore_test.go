package dbsource_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"datachat/internal/dbsource"
)

// myFunctionSamples call every function the checker allows on MariaDB, by
// the parser's name (TestMySQLRestoreFidelity fails for an allowed function
// without one). A clock or RAND without a seed is compared, not shown.
var myFunctionSamples = map[string]string{
	// Control flow.
	"if": "SELECT IF(body_mass_g > 4000, 'big', 'small') FROM penguins ORDER BY body_mass_g LIMIT 3", "ifnull": "SELECT IFNULL(sex, 'none') FROM penguins LIMIT 5",
	"nullif": "SELECT NULLIF(species, 'Adelie') FROM penguins LIMIT 3", "coalesce": "SELECT COALESCE(NULL, sex, 'x') FROM penguins LIMIT 5",
	"greatest": "SELECT GREATEST(bill_length_mm, bill_depth_mm) FROM penguins LIMIT 3", "least": "SELECT LEAST(1, 2.5, -3)",
	"isnull": "SELECT ISNULL(sex) FROM penguins LIMIT 5", "interval": "SELECT INTERVAL(23, 1, 15, 17, 30, 44, 200)",
	// Strings.
	"ascii": "SELECT ASCII(species) FROM penguins LIMIT 1", "bin": "SELECT BIN(12)", "bit_length": "SELECT BIT_LENGTH('héllo')",
	"char_length": "SELECT CHAR_LENGTH('héllo')", "character_length": "SELECT CHARACTER_LENGTH(island) FROM penguins LIMIT 1",
	"concat": "SELECT CONCAT(species, '-', island) FROM penguins LIMIT 2", "concat_ws": "SELECT CONCAT_WS('/', species, island, sex) FROM penguins LIMIT 2",
	"elt": "SELECT ELT(2, 'a', 'b', 'c')", "export_set": "SELECT EXPORT_SET(5, 'Y', 'N', ',', 4)", "field": "SELECT FIELD('b', 'a', 'b', 'c')",
	"find_in_set": "SELECT FIND_IN_SET('b', 'a,b,c')", "format": "SELECT FORMAT(12332.123456, 4), FORMAT(12332.2, 2, 'de_DE')",
	"from_base64": "SELECT FROM_BASE64(TO_BASE64('abc'))", "to_base64": "SELECT TO_BASE64(species) FROM penguins LIMIT 1",
	"hex": "SELECT HEX('abc'), HEX(255)", "unhex": "SELECT UNHEX('616263')", "insert_func": "SELECT INSERT('Quadratic', 3, 4, 'What')",
	"instr": "SELECT INSTR('foobarbar', 'bar')", "lcase": "SELECT LCASE(species) FROM penguins LIMIT 1", "lower": "SELECT LOWER('ÄBC')",
	"ucase": "SELECT UCASE('abc')", "upper": "SELECT UPPER(island) FROM penguins LIMIT 1", "left": "SELECT LEFT('foobarbar', 5)",
	"right": "SELECT RIGHT('foobarbar', 4)", "length": "SELECT LENGTH('héllo')", "octet_length": "SELECT OCTET_LENGTH('héllo')",
	"locate": "SELECT LOCATE('bar', 'foobarbar', 5)", "position": "SELECT POSITION('bar' IN 'foobarbar')", "lpad": "SELECT LPAD('hi', 5, '?!')",
	"rpad": "SELECT RPAD('hi', 5, '?')", "ltrim": "SELECT LTRIM('  barbar')", "rtrim": "SELECT RTRIM('barbar   ')",
	"trim":     "SELECT TRIM('  bar  '), TRIM(LEADING 'x' FROM 'xxbarxx'), TRIM(BOTH 'x' FROM 'xxbarxx'), TRIM(TRAILING FROM 'bar  ')",
	"make_set": "SELECT MAKE_SET(1 | 4, 'hello', 'nice', 'world')", "mid": "SELECT MID('Quadratically', 5, 6)",
	"substr": "SELECT SUBSTR('Quadratically', 5)", "substring": "SELECT SUBSTRING('Quadratically', 5, 6), SUBSTRING('Sakila' FROM -4 FOR 2)",
	"substring_index": "SELECT SUBSTRING_INDEX('www.mysql.com', '.', -2)", "oct": "SELECT OCT(12)", "ord": "SELECT ORD('2')",
	"quote": "SELECT QUOTE('Don''t!')", "repeat": "SELECT REPEAT('MySQL', 3)", "replace": "SELECT REPLACE(species, 'e', 'E') FROM penguins LIMIT 1",
	"reverse": "SELECT REVERSE('abc')", "space": "SELECT CONCAT('[', SPACE(3), ']')", "strcmp": "SELECT STRCMP('text', 'text2')",
	"soundex": "SELECT SOUNDEX('Hello')", "regexp_replace": "SELECT REGEXP_REPLACE(species, '[aeiou]', '_') FROM penguins LIMIT 2",
	"regexp_instr": "SELECT REGEXP_INSTR('abcd', 'c')", "regexp_substr": "SELECT REGEXP_SUBSTR('ab12cd', '[0-9]+')",
	"convert":   "SELECT CONVERT('héllo' USING latin1), CONVERT(species USING utf8mb4) FROM penguins LIMIT 1",
	"char_func": "SELECT CHAR(77, 121, 83, 81, 76), CHAR(0xE9 USING latin1), HEX(CHAR(1, 0))", "charset": "SELECT CHARSET(CONVERT('a' USING latin1))",
	"collation": "SELECT COLLATION(_latin1'a')", "coercibility": "SELECT COERCIBILITY('a'), COERCIBILITY(species) FROM penguins LIMIT 1",
	// Numbers.
	"abs": "SELECT ABS(-2.5)", "acos": "SELECT ACOS(0.5)", "asin": "SELECT ASIN(0.2)", "atan": "SELECT ATAN(2), ATAN(-2, 2)", "atan2": "SELECT ATAN2(1, 1)",
	"ceil": "SELECT CEIL(bill_length_mm) FROM penguins LIMIT 2", "ceiling": "SELECT CEILING(-1.23)", "conv": "SELECT CONV('a', 16, 2)", "cos": "SELECT COS(PI())",
	"cot": "SELECT COT(12)", "crc32": "SELECT CRC32(species) FROM penguins LIMIT 1", "degrees": "SELECT DEGREES(PI() / 2)", "exp": "SELECT EXP(2)",
	"floor": "SELECT FLOOR(-1.23)", "ln": "SELECT LN(2)", "log": "SELECT LOG(2), LOG(2, 65536)", "log2": "SELECT LOG2(65536)", "log10": "SELECT LOG10(100)",
	"pi": "SELECT PI()", "pow": "SELECT POW(2, 10)", "power": "SELECT POWER(2, -2)", "radians": "SELECT RADIANS(90)",
	"rand": "SELECT RAND(3), RAND() < 1", "round": "SELECT ROUND(-1.58), ROUND(1.298, 1), ROUND(avg(body_mass_g), 2) FROM penguins", "sign": "SELECT SIGN(-32)",
	"sin": "SELECT SIN(PI())", "sqrt": "SELECT SQRT(4)", "tan": "SELECT TAN(1)", "truncate": "SELECT TRUNCATE(1.999, 1)", "bit_count": "SELECT BIT_COUNT(29)",
	// Dates and times.
	"adddate": "SELECT ADDDATE('2008-01-02', 31), ADDDATE('2008-01-02', INTERVAL 31 DAY)", "addtime": "SELECT ADDTIME('2007-12-31 23:59:59.999999', '1 1:1:1.000002')",
	"convert_tz": "SELECT CONVERT_TZ('2004-01-01 12:00:00', '+00:00', '+10:00')", "curdate": "SELECT CURDATE() > '2000-01-01'",
	"current_date": "SELECT CURRENT_DATE > '2000-01-01', CURRENT_DATE() > '2000-01-01'", "current_time": "SELECT CURRENT_TIME IS NOT NULL, CURRENT_TIME() IS NOT NULL",
	"current_timestamp": "SELECT CURRENT_TIMESTAMP > '2000-01-01', CURRENT_TIMESTAMP(3) > '2000-01-01'", "curtime": "SELECT CURTIME() IS NOT NULL",
	"date": "SELECT DATE('2003-12-31 01:02:03')", "date_add": "SELECT DATE_ADD('2018-05-01', INTERVAL 1 DAY), '2018-05-01' + INTERVAL 1 MONTH",
	"date_format": "SELECT DATE_FORMAT('2009-10-04 22:23:00', '%W %M %Y')", "date_sub": "SELECT DATE_SUB('2018-05-01', INTERVAL 1 YEAR), '2018-05-01' - INTERVAL 2 DAY",
	"datediff": "SELECT DATEDIFF('2007-12-31 23:59:59', '2007-12-30')", "day": "SELECT DAY('2007-02-03')", "dayname": "SELECT DAYNAME('2007-02-03')",
	"dayofmonth": "SELECT DAYOFMONTH('2007-02-03')", "dayofweek": "SELECT DAYOFWEEK('2007-02-03')", "dayofyear": "SELECT DAYOFYEAR('2007-02-03')",
	"extract": "SELECT EXTRACT(YEAR FROM '2019-07-02'), EXTRACT(YEAR_MONTH FROM '2019-07-02 01:02:03')", "from_days": "SELECT FROM_DAYS(730669)",
	"from_unixtime": "SELECT FROM_UNIXTIME(1447430881), FROM_UNIXTIME(1447430881, '%Y %D %M')", "get_format": "SELECT GET_FORMAT(DATE, 'EUR'), GET_FORMAT(DATETIME, 'ISO')",
	"hour": "SELECT HOUR('10:05:03')", "localtime": "SELECT LOCALTIME > '2000-01-01', LOCALTIME() > '2000-01-01'", "localtimestamp": "SELECT LOCALTIMESTAMP > '2000-01-01'",
	"makedate": "SELECT MAKEDATE(2011, 31)", "maketime": "SELECT MAKETIME(12, 15, 30)", "microsecond": "SELECT MICROSECOND('12:00:00.123456')",
	"minute": "SELECT MINUTE('2008-02-03 10:05:03')", "month": "SELECT MONTH('2008-02-03')", "monthname": "SELECT MONTHNAME('2008-02-03')",
	"now": "SELECT NOW() > '2000-01-01', NOW(6) > '2000-01-01'", "period_add": "SELECT PERIOD_ADD(200801, 2)", "period_diff": "SELECT PERIOD_DIFF(200802, 200703)",
	"quarter": "SELECT QUARTER('2008-04-01')", "second": "SELECT SECOND('10:05:03')", "sec_to_time": "SELECT SEC_TO_TIME(2378)",
	"str_to_date": "SELECT STR_TO_DATE('01,5,2013', '%d,%m,%Y')", "subdate": "SELECT SUBDATE('2008-01-02', 31)", "subtime": "SELECT SUBTIME('2007-12-31 23:59:59.999999', '1 1:1:1.000002')",
	"sysdate": "SELECT SYSDATE() > '2000-01-01'", "time": "SELECT TIME('2003-12-31 01:02:03')", "time_format": "SELECT TIME_FORMAT('100:00:00', '%H %k %h %I %l')",
	"time_to_sec": "SELECT TIME_TO_SEC('22:23:00')", "timediff": "SELECT TIMEDIFF('2000-01-01 00:00:00', '2000-01-01 00:00:00.000001')",
	"timestamp": "SELECT TIMESTAMP('2003-12-31'), TIMESTAMP('2003-12-31 12:00:00', '12:00:00')", "timestampadd": "SELECT TIMESTAMPADD(MINUTE, 1, '2003-01-02')",
	"timestampdiff": "SELECT TIMESTAMPDIFF(MONTH, '2003-02-01', '2003-05-01')", "to_days": "SELECT TO_DAYS('2007-10-07')", "to_seconds": "SELECT TO_SECONDS('2009-11-29')",
	"unix_timestamp": "SELECT UNIX_TIMESTAMP('2015-11-13 10:20:19'), UNIX_TIMESTAMP() > 0", "utc_date": "SELECT UTC_DATE > '2000-01-01', UTC_DATE() > '2000-01-01'",
	"utc_time": "SELECT UTC_TIME() IS NOT NULL", "utc_timestamp": "SELECT UTC_TIMESTAMP() > '2000-01-01'", "week": "SELECT WEEK('2008-02-20'), WEEK('2008-02-20', 1)",
	"weekday": "SELECT WEEKDAY('2008-02-03 22:23:00')", "weekofyear": "SELECT WEEKOFYEAR('2008-02-20')", "year": "SELECT YEAR('1987-01-01')",
	"yearweek": "SELECT YEARWEEK('1987-01-01')", "last_day": "SELECT LAST_DAY('2004-02-05')",
	"'tidb`.(dateliteral": "SELECT DATE '2020-02-29'", "'tidb`.(timeliteral": "SELECT TIME '12:34:56'", "'tidb`.(timestampliteral": "SELECT TIMESTAMP '2020-02-29 12:34:56'",
	// JSON.
	"json_type": `SELECT JSON_TYPE('{"a": [1, 2]}')`, "json_extract": `SELECT JSON_EXTRACT(j, '$.b') FROM alltypes`,
	"json_unquote": `SELECT JSON_UNQUOTE('"abc"')`, "json_array": "SELECT JSON_ARRAY(1, 'a', NULL)", "json_object": "SELECT JSON_OBJECT('species', species) FROM penguins LIMIT 1",
	"json_merge": `SELECT JSON_MERGE('[1]', '[2]')`, "json_set": `SELECT JSON_SET('{"a": 1}', '$.b', 2)`, "json_insert": `SELECT JSON_INSERT('{"a": 1}', '$.a', 9, '$.c', 3)`,
	"json_replace": `SELECT JSON_REPLACE('{"a": 1}', '$.a', 9)`, "json_remove": `SELECT JSON_REMOVE('[1, 2, 3]', '$[1]')`, "json_overlaps": "SELECT JSON_OVERLAPS('[1, 2]', '[2]')",
	"json_contains": `SELECT JSON_CONTAINS('{"a": 1}', '1', '$.a')`, "json_contains_path": `SELECT JSON_CONTAINS_PATH('{"a": 1}', 'one', '$.a', '$.e')`,
	"json_valid": "SELECT JSON_VALID('{}'), JSON_VALID('{')", "json_array_append": `SELECT JSON_ARRAY_APPEND('[1]', '$', 2)`, "json_array_insert": `SELECT JSON_ARRAY_INSERT('[1, 3]', '$[1]', 2)`,
	"json_merge_patch": `SELECT JSON_MERGE_PATCH('{"a": 1}', '{"a": null, "b": 2}')`, "json_merge_preserve": `SELECT JSON_MERGE_PRESERVE('[1]', '[2]')`,
	"json_quote": `SELECT JSON_QUOTE('a"b')`, "json_search": `SELECT JSON_SEARCH('["abc", "x"]', 'one', 'abc')`, "json_depth": "SELECT JSON_DEPTH('[[1]]')",
	"json_keys": `SELECT JSON_KEYS('{"a": 1, "b": 2}')`, "json_length": "SELECT JSON_LENGTH('[1, 2, 3]')", "json_value": `SELECT JSON_VALUE('{"a": "x"}', '$.a')`,
	"json_pretty": "SELECT JSON_PRETTY('[1, 2]')", "json_detailed": "SELECT JSON_DETAILED('[1, 2]')", "json_compact": "SELECT JSON_COMPACT('[1,   2]')",
	"json_loose": "SELECT JSON_LOOSE('[1,2]')", "json_exists": `SELECT JSON_EXISTS('{"a": 1}', '$.a')`, "json_query": `SELECT JSON_QUERY('{"a": [1]}', '$.a')`,
	"json_equals": "SELECT JSON_EQUALS('[1]', '[1]')", "json_normalize": `SELECT JSON_NORMALIZE('{"b": 1, "a": 2}')`,
	// XML, hashes, addresses, MariaDB's own.
	"extractvalue": "SELECT EXTRACTVALUE('<a><b>x</b></a>', '/a/b')", "updatexml": "SELECT UPDATEXML('<a><b>x</b></a>', '/a/b', '<c>y</c>')",
	"md5": "SELECT MD5(species) FROM penguins LIMIT 1", "sha": "SELECT SHA('abc')", "sha1": "SELECT SHA1('abc')", "sha2": "SELECT SHA2('abc', 256)",
	"inet_aton": "SELECT INET_ATON('10.0.5.9')", "inet_ntoa": "SELECT INET_NTOA(167773449)", "inet6_aton": "SELECT HEX(INET6_ATON('fdfe::5a55:caff:fefa:9089'))",
	"inet6_ntoa": "SELECT INET6_NTOA(UNHEX('0A000509'))", "is_ipv4": "SELECT IS_IPV4('10.0.5.9')", "is_ipv4_compat": "SELECT IS_IPV4_COMPAT(INET6_ATON('::10.0.5.9'))",
	"is_ipv4_mapped": "SELECT IS_IPV4_MAPPED(INET6_ATON('::ffff:10.0.5.9'))", "is_ipv6": "SELECT IS_IPV6('::1')",
	"nvl": "SELECT NVL(sex, '?') FROM penguins LIMIT 5", "nvl2": "SELECT NVL2(sex, 'known', 'unknown') FROM penguins LIMIT 5", "natural_sort_key": "SELECT NATURAL_SORT_KEY('a10b2')",
}

// myAggregateSamples call every aggregate the checker allows, and
// myWindowSamples every window function.
var myAggregateSamples = map[string]string{
	"count":          "SELECT count(*), COUNT(sex), COUNT(DISTINCT island) FROM penguins",
	"sum":            "SELECT species, SUM(body_mass_g) FROM penguins GROUP BY species ORDER BY species",
	"avg":            "SELECT ROUND(AVG(body_mass_g), 3), ROUND(AVG(DISTINCT body_mass_g), 3) FROM penguins",
	"max":            "SELECT MAX(body_mass_g), MAX(species) FROM penguins",
	"min":            "SELECT MIN(bill_length_mm) FROM penguins",
	"group_concat":   "SELECT GROUP_CONCAT(DISTINCT island ORDER BY island DESC SEPARATOR '; ') FROM penguins",
	"bit_and":        "SELECT BIT_AND(body_mass_g) FROM penguins",
	"bit_or":         "SELECT BIT_OR(body_mass_g) FROM penguins",
	"bit_xor":        "SELECT BIT_XOR(body_mass_g) FROM penguins",
	"var_pop":        "SELECT ROUND(VAR_POP(body_mass_g), 3), ROUND(VARIANCE(body_mass_g), 3) FROM penguins",
	"var_samp":       "SELECT ROUND(VAR_SAMP(body_mass_g), 3) FROM penguins",
	"stddev_pop":     "SELECT ROUND(STDDEV_POP(body_mass_g), 3), ROUND(STD(body_mass_g), 3), ROUND(STDDEV(body_mass_g), 3) FROM penguins",
	"stddev_samp":    "SELECT ROUND(STDDEV_SAMP(body_mass_g), 3) FROM penguins",
	"json_arrayagg":  "SELECT JSON_ARRAYAGG(island) FROM (SELECT DISTINCT island FROM penguins ORDER BY island) d",
	"json_objectagg": "SELECT JSON_OBJECTAGG(species, n) FROM (SELECT species, count(*) AS n FROM penguins GROUP BY species) d",
}

var myWindowSamples = map[string]string{
	"row_number":   "SELECT species, ROW_NUMBER() OVER (PARTITION BY species ORDER BY body_mass_g DESC, bill_length_mm) AS r FROM penguins ORDER BY species, r LIMIT 5",
	"rank":         "SELECT body_mass_g, RANK() OVER w FROM penguins WINDOW w AS (ORDER BY body_mass_g) ORDER BY body_mass_g LIMIT 5",
	"dense_rank":   "SELECT body_mass_g, DENSE_RANK() OVER (ORDER BY body_mass_g) FROM penguins ORDER BY body_mass_g LIMIT 5",
	"cume_dist":    "SELECT DISTINCT island, CUME_DIST() OVER (ORDER BY island) FROM penguins ORDER BY island",
	"percent_rank": "SELECT DISTINCT island, PERCENT_RANK() OVER (ORDER BY island) FROM penguins ORDER BY island",
	"ntile":        "SELECT id, NTILE(4) OVER (ORDER BY id) FROM big WHERE id <= 8 ORDER BY id",
	"lead":         "SELECT id, LEAD(id, 2) OVER (ORDER BY id) FROM big WHERE id <= 5 ORDER BY id",
	"lag":          "SELECT id, LAG(id) OVER (ORDER BY id) FROM big WHERE id <= 5 ORDER BY id",
	"first_value":  "SELECT id, FIRST_VALUE(id) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM big WHERE id <= 5 ORDER BY id",
	"last_value":   "SELECT id, LAST_VALUE(id) OVER (ORDER BY id ROWS BETWEEN CURRENT ROW AND 2 FOLLOWING) FROM big WHERE id <= 5 ORDER BY id",
	"nth_value":    "SELECT id, NTH_VALUE(id, 2) OVER (ORDER BY id ROWS UNBOUNDED PRECEDING) FROM big WHERE id <= 5 ORDER BY id",
	"count":        "SELECT id, COUNT(*) OVER (ORDER BY id RANGE BETWEEN 2 PRECEDING AND CURRENT ROW) FROM big WHERE id <= 5 ORDER BY id",
	"sum":          "SELECT id, SUM(id) OVER (ORDER BY id) FROM big WHERE id <= 5 ORDER BY id",
	"avg":          "SELECT species, AVG(body_mass_g) OVER (PARTITION BY species) FROM penguins ORDER BY species LIMIT 3",
	"max":          "SELECT id, MAX(id) OVER (ORDER BY id ROWS 1 PRECEDING) FROM big WHERE id <= 5 ORDER BY id",
	"min":          "SELECT id, MIN(id) OVER () FROM big WHERE id <= 5 ORDER BY id",
	"bit_and":      "SELECT id, BIT_AND(id) OVER (ORDER BY id) FROM big WHERE id <= 5 ORDER BY id",
	"bit_or":       "SELECT id, BIT_OR(id) OVER (ORDER BY id) FROM big WHERE id <= 5 ORDER BY id",
	"bit_xor":      "SELECT id, BIT_XOR(id) OVER (ORDER BY id) FROM big WHERE id <= 5 ORDER BY id",
	"var_pop":      "SELECT id, VAR_POP(id) OVER (ORDER BY id) FROM big WHERE id <= 5 ORDER BY id",
	"var_samp":     "SELECT id, VAR_SAMP(id) OVER (ORDER BY id) FROM big WHERE id <= 5 ORDER BY id",
	"stddev_pop":   "SELECT id, ROUND(STDDEV_POP(id) OVER (ORDER BY id), 6) FROM big WHERE id <= 5 ORDER BY id",
	"stddev_samp":  "SELECT id, ROUND(STDDEV_SAMP(id) OVER (ORDER BY id), 6) FROM big WHERE id <= 5 ORDER BY id",
}

// myConstructSamples are the statement shapes and expressions the checker
// allows, each written as MySQL does, to run restored.
var myConstructSamples = []string{
	"SELECT * FROM penguins ORDER BY body_mass_g DESC, species LIMIT 3",
	"SELECT p.* FROM penguins AS p WHERE p.sex IS NULL",
	"SELECT DISTINCT island FROM penguins ORDER BY 1",
	"SELECT species, count(*) FROM penguins GROUP BY species WITH ROLLUP",
	"SELECT species, count(*) AS n FROM penguins GROUP BY species HAVING n > 100 ORDER BY n",
	"SELECT species FROM penguins LIMIT 2 OFFSET 10",
	"SELECT species FROM penguins LIMIT 10, 2",
	"SELECT a.species, b.island FROM penguins a JOIN penguins b ON a.island = b.island AND a.species <> b.species LIMIT 3",
	"SELECT a.species FROM penguins a LEFT JOIN tips b ON a.species = b.day WHERE b.day IS NULL LIMIT 2",
	"SELECT a.species FROM penguins a RIGHT JOIN tips b ON a.species = b.day LIMIT 2",
	"SELECT count(*) FROM penguins a CROSS JOIN tips b",
	"SELECT count(*) FROM penguins, tips WHERE penguins.species <> tips.day",
	"WITH c AS (SELECT species FROM penguins LIMIT 2) SELECT count(*) FROM c, tips, c AS c2",
	"SELECT count(*) FROM penguins a STRAIGHT_JOIN tips b",
	"SELECT count(*) FROM penguins NATURAL JOIN penguin_species",
	"SELECT count(*) FROM penguins JOIN penguin_species USING (species)",
	"SELECT * FROM (SELECT species, count(*) AS n FROM penguins GROUP BY species) AS d WHERE d.n > 100",
	"WITH c AS (SELECT species, count(*) AS n FROM penguins GROUP BY species) SELECT * FROM c ORDER BY n",
	"WITH a AS (SELECT 1 AS x), b AS (SELECT x + 1 AS y FROM a) SELECT * FROM a, b",
	"WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 5) SELECT sum(n) FROM c",
	"WITH creds AS (SELECT species FROM penguins LIMIT 1) SELECT * FROM creds",
	"SELECT species FROM penguins UNION SELECT island FROM penguins ORDER BY 1",
	"SELECT species FROM penguins UNION ALL SELECT day FROM tips ORDER BY 1 LIMIT 3",
	"SELECT species FROM penguins INTERSECT SELECT species FROM penguin_species",
	"SELECT island FROM penguins EXCEPT SELECT species FROM penguins",
	"(SELECT species FROM penguins LIMIT 1) UNION (SELECT island FROM penguins LIMIT 1)",
	"SELECT species FROM penguins WHERE body_mass_g = (SELECT MAX(body_mass_g) FROM penguins)",
	"SELECT count(*) FROM penguins WHERE species IN (SELECT species FROM penguin_species)",
	"SELECT count(*) FROM penguins p WHERE EXISTS (SELECT 1 FROM tips t WHERE t.size > p.body_mass_g / 1000)",
	"SELECT count(*) FROM penguins WHERE body_mass_g > ALL (SELECT body_mass_g FROM penguins WHERE species = 'Adelie')",
	"SELECT count(*) FROM penguins WHERE body_mass_g < ANY (SELECT body_mass_g FROM penguins WHERE species = 'Adelie')",
	"SELECT (SELECT count(*) FROM tips), (SELECT MAX(id) FROM big)",
	"SELECT CASE species WHEN 'Adelie' THEN 1 WHEN 'Gentoo' THEN 2 ELSE 3 END, CASE WHEN sex IS NULL THEN '?' ELSE sex END FROM penguins LIMIT 5",
	"SELECT count(*) FROM penguins WHERE body_mass_g BETWEEN 3000 AND 4000 AND island NOT IN ('Dream', 'Biscoe')",
	"SELECT count(*) FROM penguins WHERE species LIKE 'A%' OR species NOT LIKE '%o' OR species LIKE 'x!%' ESCAPE '!'",
	"SELECT count(*) FROM penguins WHERE species REGEXP '^A' OR species RLIKE 'o$' OR species NOT REGEXP 'e'",
	"SELECT sex IS NULL, sex IS NOT NULL, (body_mass_g > 4000) IS TRUE, (body_mass_g > 4000) IS NOT FALSE, NOT (body_mass_g > 4000), !(1) FROM penguins LIMIT 5",
	"SELECT 7 DIV 2, 7 MOD 2, 7 % 3, -7, +7, ~7, 6 & 3, 6 | 3, 6 ^ 3, 1 << 3, 16 >> 2, 1 XOR 0, 1 && 0, 1 || 0, NULL <=> NULL, 2 <> 3, 2 != 3",
	"SELECT ROW(1, 2) = ROW(1, 2), (1, 2) < (1, 3)",
	"SELECT CAST(body_mass_g AS CHAR), CAST('12' AS SIGNED), CAST('-12' AS UNSIGNED), CAST('1.5' AS DECIMAL(5, 2)), CAST('2020-01-02' AS DATE), CAST('2020-01-02 03:04:05.5' AS DATETIME(1)), CAST('12:00' AS TIME), CAST(1 AS DOUBLE) FROM penguins LIMIT 1",
	"SELECT CAST(species AS CHAR(3)), CAST('é' AS CHAR CHARACTER SET latin1), CONVERT('12', SIGNED), CONVERT(species, CHAR(2)), BINARY 'a' = 'A' FROM penguins LIMIT 1",
	"SELECT species COLLATE utf8mb4_bin = 'adelie', 'a' = 'A' COLLATE utf8mb4_general_ci FROM penguins LIMIT 1",
	"SELECT 'it''s', 'it\\'s', \"dq\", 'a\\nb', 'back\\\\slash', 'c\\%d' LIKE 'c\\%d', 'tab\\there', 'nul\\0byte', '\\Z'",
	"SELECT _latin1'é', _binary'abc', _utf8mb4'x', N'national', X'414243', x'41', 0x414243, b'1000001', 0b101, 'a' 'b' 'c'",
	"SELECT 1, -1, 1.5, -0.25, 1e3, 1.5E-3, 18446744073709551615, 18446744073709551616, 123456789012345678901234567890.5, TRUE, FALSE, NULL",
	"SELECT 'héllo wörld ✓', '日本語', '😀'",
	"SELECT species AS `name with space`, island AS `a``b`, sex AS \"quoted\" FROM penguins LIMIT 1",
	"SELECT `Name/Alias`, `Current?` FROM avengers LIMIT 2",
	"SELECT `名前` FROM test_mskanji LIMIT 1",
	"SELECT count(*) FROM penguins USE INDEX () WHERE species = 'Adelie'",
	"SELECT count(*) FROM big FORCE INDEX (PRIMARY) WHERE id < 10",
	"SELECT count(*) FROM big IGNORE INDEX (PRIMARY) WHERE id < 10",
	"SELECT SQL_NO_CACHE SQL_CALC_FOUND_ROWS HIGH_PRIORITY SQL_BUFFER_RESULT SQL_SMALL_RESULT species FROM penguins LIMIT 1",
	"SELECT 1 FROM DUAL",
	"SELECT 1 FROM DUAL WHERE 1 = 1",
	"SELECT count(*) FROM penguins WHERE body_mass_g > 4000 AND (island = 'Dream' OR NOT island = 'Biscoe')",
	"SELECT species, body_mass_g FROM penguins ORDER BY body_mass_g DESC, species ASC LIMIT 3",
	"SELECT count(*) AS `count(*)`, count(*) FROM penguins",
	"SELECT SUM(body_mass_g) / COUNT(*), AVG(body_mass_g) * 2 - 1 FROM penguins",
	"SELECT * FROM (SELECT count(*) FROM penguins) d",
	"SELECT d.`count(*)` FROM (SELECT count(*) FROM penguins) d",
	"SELECT dtm, ts, tm, y, bits + 0, e, ub FROM alltypes",
	"SELECT MATCH(t) AGAINST ('héllo'), MATCH(t) AGAINST ('+h*' IN BOOLEAN MODE), MATCH(t) AGAINST ('x' IN NATURAL LANGUAGE MODE WITH QUERY EXPANSION) FROM alltypes",
	"SELECT species FROM penguins ORDER BY species LIMIT 1;",
	"select species from penguins where island = 'Dream' -- a comment\n and sex = 'MALE' # another\n limit 1",
	"SELECT /* inline */ count(*) FROM penguins",
	"SELECT 0x41 + 0, X'41' + 0, x'41', 0x41, CHAR(0x41), b'101' + 0, 0b101 + 0, X''",
	"SELECT count(*) FROM penguins WHERE body_mass_g = 3000" + strings.Repeat(" OR body_mass_g = 3750", 300),
}

// TestMySQLRestoreFidelity runs each allowed function and construct as the
// statement says (on an admin session) and as the checker restores it,
// compares the two (names and values), and runs it through the sandbox:
// what the checker writes back is what MariaDB reads, with the same meaning.
func TestMySQLRestoreFidelity(t *testing.T) {
	f := mySetup(t)
	ctx := context.Background()
	db := openMy(t, f, dbsource.Options{})
	if err := db.Check(ctx); err != nil {
		t.Fatal(err)
	}
	cfg, err := mysql.ParseDSN(f.adminDSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = f.db
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	admin.SetMaxOpenConns(1)
	if _, err := admin.ExecContext(ctx, "SET time_zone = '+00:00'"); err != nil {
		t.Fatal(err)
	}
	scalar, aggregate, window := dbsource.MyAllowedFunctions(true)
	for _, l := range []struct {
		kind    string
		names   []string
		samples map[string]string
	}{{"function", scalar, myFunctionSamples}, {"aggregate", aggregate, myAggregateSamples}, {"window function", window, myWindowSamples}} {
		for _, name := range l.names {
			if _, ok := l.samples[name]; !ok {
				t.Errorf("allowed %s %s has no sample to run restored on MariaDB", l.kind, name)
			}
		}
		for name, q := range l.samples {
			if !slices.Contains(l.names, name) {
				t.Errorf("%s sample %s: not an allowed %s", l.kind, name, l.kind)
				continue
			}
			t.Run(l.kind+" "+name, func(t *testing.T) { checkRestored(t, db, admin, q) })
		}
	}
	for _, q := range myConstructSamples {
		t.Run(q, func(t *testing.T) { checkRestored(t, db, admin, q) })
	}
}

// checkRestored compares q and its restored text on admin, and runs q in
// db's sandbox.
func checkRestored(t *testing.T, db *dbsource.DB, admin *sql.DB, q string) {
	t.Helper()
	ctx := context.Background()
	restored, err := dbsource.MyRestored(ctx, db, q)
	if err != nil {
		t.Fatalf("refused: %v", err)
	}
	wantCols, want, err := textRows(admin, q)
	if err != nil {
		t.Fatalf("as written: %v", err)
	}
	gotCols, got, err := textRows(admin, restored)
	if err != nil {
		t.Fatalf("restored %s: %v", restored, err)
	}
	if !slices.Equal(gotCols, wantCols) {
		t.Errorf("restored %s\ncolumns %q, want %q", restored, gotCols, wantCols)
	}
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Errorf("restored %s\nrows %q, want %q", restored, got, want)
	}
	if _, err := db.Query(ctx, q); err != nil {
		t.Errorf("in the sandbox: %v", err)
	}
}

// textRows runs q and returns its column names and rows as text ("NULL"
// for NULL).
func textRows(db *sql.DB, q string) ([]string, [][]string, error) {
	rows, err := db.Query(q)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, nil, err
	}
	var out [][]string
	vals := make([]sql.RawBytes, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, nil, err
		}
		row := make([]string, len(vals))
		for i, v := range vals {
			if v == nil {
				row[i] = "NULL"
			} else {
				row[i] = strings.Clone(string(v))
			}
		}
		out = append(out, row)
	}
	return cols, out, rows.Err()
}
