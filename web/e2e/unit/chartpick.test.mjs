import { test } from 'node:test';
import assert from 'node:assert/strict';
import { pickChart } from '../../assets/js/chartpick.js';

const col = (name, type) => ({ name, type });

test('date column → line chart in time order', () => {
  const c = pickChart([col('day', 'date'), col('sales', 'decimal'), col('n', 'integer')],
    [['2024-01-03', '5.5', 2], ['2024-01-01', '1.0', 1], ['2024-01-02', null, 3]]);
  assert.equal(c.kind, 'line');
  assert.deepEqual(c.labels, ['2024-01-01', '2024-01-02', '2024-01-03']);
  assert.deepEqual(c.datasets.map((d) => d.label), ['sales', 'n']);
  assert.deepEqual(c.datasets[0].data, [1, null, 5.5]);
});

test('ISO text dates and year integers count as time', () => {
  assert.equal(pickChart([col('month', 'text'), col('v', 'float')], [['2024-02', 1], ['2024-01', 2]]).kind, 'line');
  const y = pickChart([col('year', 'integer'), col('total', 'integer')], [[2021, 5], [2020, 3]]);
  assert.equal(y.kind, 'line');
  assert.deepEqual(y.labels, ['2020', '2021']);
});

test('text + number → bar chart, top 20 by value beyond 20 rows', () => {
  const rows = Array.from({ length: 30 }, (_, i) => [`c${i}`, i]);
  const c = pickChart([col('cat', 'text'), col('v', 'integer')], rows);
  assert.equal(c.kind, 'bar');
  assert.equal(c.labels.length, 20);
  assert.equal(c.labels[0], 'c29');
  assert.match(c.note, /Top 20 of 30/);
  const few = pickChart([col('cat', 'text'), col('v', 'integer')], [['b', 1], ['a', 2]]);
  assert.deepEqual(few.labels, ['b', 'a'], 'the query order is kept');
});

test('no chart for one row, no numbers or no category', () => {
  assert.equal(pickChart([col('cat', 'text'), col('v', 'integer')], [['a', 1]]), null);
  assert.equal(pickChart([col('a', 'text'), col('b', 'text')], [['a', 'b'], ['c', 'd']]), null);
  assert.equal(pickChart([col('x', 'float'), col('y', 'float')], [[3, 2], [1, 4]]), null, 'numbers in no order label nothing');
  assert.equal(pickChart([col('cat', 'text'), col('v', 'integer')], [['a', null], ['b', null]]), null);
});

test('a kind can be forced', () => {
  assert.equal(pickChart([col('cat', 'text'), col('v', 'integer')], [['a', 1], ['b', 2]], { kind: 'line' }).kind, 'line');
});

test('series on very different scales are left out', () => {
  const c = pickChart([col('cat', 'text'), col('n', 'integer'), col('avg', 'float'), col('total', 'integer')],
    [['a', 150, 3.5, 120], ['b', 60, 4.1, 80]]);
  assert.deepEqual(c.datasets.map((d) => d.label), ['n', 'total']);
});
