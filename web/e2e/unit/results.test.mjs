// Results as the page shows them (issue 24): charts by default and their
// kinds, numbers with thousands separators, downloads named after the
// question, the column types of a reopened answer.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { pickChart, whyNoChart, kindsFor, KINDS } from '../../assets/js/chartpick.js';
import { formatCell, groupDigits, resultFileName, storedResult } from '../../assets/js/table.js';

const col = (name, type) => ({ name, type });

test('a label column with a few numeric columns charts; ordered numbers as a line', () => {
  const bar = pickChart([col('species', 'text'), col('n', 'integer'), col('mass', 'float')], [['A', 152, 3700], ['G', 124, 5076]]);
  assert.equal(bar.kind, 'bar');
  const line = pickChart([col('flipper_mm', 'integer'), col('n', 'integer')], [[170, 3], [180, 40], [190, 90]]);
  assert.equal(line.kind, 'line');
  assert.deepEqual(line.labels, ['170', '180', '190']);
  assert.equal(whyNoChart([col('flipper_mm', 'integer'), col('n', 'integer')], [[170, 3], [180, 40]]), '');
});

test('a result that cannot be charted says why', () => {
  assert.equal(whyNoChart([col('n', 'integer')], [[344]]), 'one row');
  assert.equal(whyNoChart([col('a', 'text'), col('b', 'text')], [['x', 'y'], ['z', 'w']]), 'no number column');
  assert.equal(whyNoChart([col('x', 'float'), col('y', 'float')], [[3, 2], [1, 4]]), 'no label column for the numbers');
  assert.equal(whyNoChart([col('cat', 'text'), col('v', 'integer')], [['a', null], ['b', null]]), 'no numbers to plot');
  assert.equal(whyNoChart([col('cat', 'text')], []), 'no rows');
});

test('kinds: bar, line, area, scatter, and pie only for up to 8 parts of one non-negative series', () => {
  const few = pickChart([col('cat', 'text'), col('v', 'integer')], [['a', 1], ['b', 2], ['c', 3]]);
  assert.deepEqual(kindsFor(few), KINDS);
  for (const k of KINDS) assert.equal(pickChart([col('cat', 'text'), col('v', 'integer')], [['a', 1], ['b', 2]], { kind: k }).kind, k);
  const nine = pickChart([col('cat', 'text'), col('v', 'integer')], Array.from({ length: 9 }, (_, i) => [`c${i}`, i + 1]));
  assert.deepEqual(kindsFor(nine), ['bar', 'line', 'area', 'scatter']);
  assert.equal(pickChart([col('cat', 'text'), col('v', 'integer')], Array.from({ length: 9 }, (_, i) => [`c${i}`, i + 1]), { kind: 'pie' }).kind, 'bar');
  const two = pickChart([col('cat', 'text'), col('v', 'integer'), col('w', 'integer')], [['a', 1, 2], ['b', 2, 3]]);
  assert.ok(!kindsFor(two).includes('pie'), 'two series are not parts of one whole');
  const neg = pickChart([col('cat', 'text'), col('v', 'integer')], [['a', -1], ['b', 2]]);
  assert.ok(!kindsFor(neg).includes('pie'), 'a negative part');
});

test('numbers read as numbers: thousands separators, not in years or ids', () => {
  assert.equal(formatCell(1234567, 'integer', 'n'), '1,234,567');
  assert.equal(formatCell(3701, 'float', 'avg_mass'), '3,701');
  assert.equal(formatCell(1234.5678901, 'float'), '1,234.56789');
  assert.equal(formatCell('1234.50', 'decimal'), '1,234.50');
  assert.equal(formatCell('-9007199254740993', 'integer'), '-9,007,199,254,740,993');
  assert.equal(formatCell(999, 'integer'), '999');
  assert.equal(formatCell(2024, 'integer', 'year'), '2024');
  assert.equal(formatCell(12345, 'integer', 'customer_id'), '12345');
  assert.equal(formatCell('NaN', 'float'), 'NaN');
  assert.equal(formatCell('12345', 'text'), '12345', 'text stays as sent');
  assert.equal(groupDigits('1e+21'), '1e+21');
});

test('downloads are named after the question', () => {
  assert.equal(resultFileName('How many penguins per species?'), 'how-many-penguins-per-species.csv');
  assert.equal(resultFileName('Combien de pingouins? Élevés', 'xlsx'), 'combien-de-pingouins-eleves.xlsx');
  assert.equal(resultFileName(''), 'result.csv');
  assert.ok(resultFileName('word '.repeat(40)).length <= 64);
});

test('a reopened result keeps the stored column types', () => {
  const text = 'species | n | avg_mass\nAdelie | 152 | 3701\nGentoo | 124 | 5076\n(2 rows)';
  const cols = [col('species', 'text'), { name: 'n', type: 'integer', sql_type: 'BIGINT' }, { name: 'avg_mass', type: 'float', sql_type: 'DOUBLE' }];
  const r = storedResult(text, cols);
  assert.deepEqual(r.columns.map((c) => c.type), ['text', 'integer', 'float']);
  assert.equal(r.columns[2].sql_type, 'DOUBLE');
  assert.deepEqual(r.rows[0], ['Adelie', 152, 3701]);
  // Without stored columns (an answer kept before they were), the types are guessed.
  assert.equal(storedResult(text).columns[2].type, 'integer');
  // Stored columns that do not fit the text are not used.
  assert.equal(storedResult(text, [col('other', 'float')]).columns[0].name, 'species');
  assert.equal(storedResult('not a table'), null);
});

test('the citation popover gets the page and section, not the score', async () => {
  const { forReader } = await import('../../assets/js/chat.js');
  const src = { id: 's1', text: 'x', score: 7.18, distance: 0.2, metadata: { document: 'a.md', page: null, section: 'Results > Revenue' } };
  const r = forReader(src);
  assert.equal(r.score, undefined);
  assert.equal(r.distance, undefined);
  assert.equal(r.metadata.heading, 'Results > Revenue');
  assert.equal(src.score, 7.18, 'the answer\'s own source is left as it is');
  assert.equal(forReader({ metadata: { heading: 'H', section: 'S' } }).metadata.heading, 'H');
});

test('XLSX: column letters and sheet names', async () => {
  const { colName, sheetName } = await import('../../assets/js/xlsx.js');
  assert.deepEqual([0, 25, 26, 27, 701, 702].map(colName), ['A', 'Z', 'AA', 'AB', 'ZZ', 'AAA']);
  assert.equal(sheetName('How many? [per species]'), 'How many   per species');
  assert.equal(sheetName(''), 'Result');
  assert.ok(sheetName('x'.repeat(50)).length <= 31);
});

test('a reopened decimal or text column keeps its cells as written', () => {
  const text = 'code | price\n007 | 12.50\n010 | 3.10\n(2 rows)';
  const r = storedResult(text, [col('code', 'text'), col('price', 'decimal')]);
  assert.deepEqual(r.rows, [['007', '12.50'], ['010', '3.10']]);
  assert.equal(formatCell(r.rows[0][1], 'decimal', 'price'), '12.50');
});
