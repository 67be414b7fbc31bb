import { test } from 'node:test';
import assert from 'node:assert/strict';
import { draftOf, newRow, changesOf, placeProblems, summary, formatValue } from '../../assets/js/semantic-model.js';

const orders = {
  kind: 'dataset', dataset_id: 'd1', name: 'orders', description: 'One row per order.',
  columns: [{ name: 'amount', type: 'decimal', description: '' }, { name: 'region', type: 'text', description: 'Two letters.' }],
  metrics: { revenue: { sql: 'sum(amount)', filter: "status = 'paid'", description: 'Paid only.' }, orders: { sql: 'count(*)' } },
  synonyms: { EMEA: "region IN ('DE', 'FR')" },
  relationships: [{ columns: ['region'], ref_table: 'regions', ref_columns: ['code'] }],
};

test('an untouched draft changes nothing', () => {
  const { change, problems } = changesOf(orders, draftOf(orders), true);
  assert.equal(change, null);
  assert.deepEqual(problems, []);
});

test('only what differs is sent; removals are empty texts, so others’ entries stay', () => {
  const d = draftOf(orders);
  d.metrics = d.metrics.filter((m) => m.name !== 'orders');
  d.metrics.push({ ...newRow('metrics'), name: ' margin ', sql: ' sum(amount) - sum(cost) ' });
  d.synonyms[0].meaning = "region IN ('DE', 'FR', 'IT')";
  d.synonyms.push({ ...newRow('synonyms'), term: 'turnover', meaning: 'revenue' });
  d.synonyms.push(newRow('synonyms')); // left empty: ignored
  d.columns.amount = 'In euros.';
  const { change, problems } = changesOf(orders, d, true);
  assert.deepEqual(problems, []);
  assert.deepEqual(change, {
    columns: { amount: 'In euros.' },
    metrics: { margin: { sql: 'sum(amount) - sum(cost)', filter: '', description: '' }, orders: { sql: '' } },
    synonyms: { EMEA: "region IN ('DE', 'FR', 'IT')", turnover: 'revenue' },
  });
  // A dataset's descriptions are edited elsewhere: not sent from here.
  assert.equal(changesOf(orders, d, false).change.columns, undefined);
});

test('relationships are sent whole when they differ, read from comma lists', () => {
  const d = draftOf(orders);
  d.relationships.push({ ...newRow('relationships'), columns: 'a, b', ref_table: 'other', ref_columns: 'x,y' });
  const { change, relIds } = changesOf(orders, d, true);
  assert.deepEqual(change.relationships, [orders.relationships[0], { columns: ['a', 'b'], ref_table: 'other', ref_columns: ['x', 'y'] }]);
  assert.deepEqual(relIds, d.relationships.map((r) => r.id));
  d.relationships = [];
  assert.deepEqual(changesOf(orders, d, true).change, { relationships: [] });
});

test('incomplete rows are refused before sending, on their field', () => {
  const d = draftOf(orders);
  const noName = { ...newRow('metrics'), sql: 'count(*)' };
  const noSQL = { ...newRow('metrics'), name: 'n' };
  const twice = { ...newRow('metrics'), name: 'revenue', sql: 'sum(x)' };
  const noMeaning = { ...newRow('synonyms'), term: 'APAC' };
  const join = { ...newRow('relationships'), columns: 'a, b', ref_table: 't', ref_columns: 'x' };
  d.metrics.push(noName, noSQL, twice);
  d.synonyms.push(noMeaning);
  d.relationships.push(join);
  const { problems } = changesOf(orders, d, true);
  assert.deepEqual(problems.map((p) => [p.id, p.part]), [[noName.id, 'name'], [noSQL.id, 'sql'], [twice.id, 'name'], [noMeaning.id, 'meaning'], [join.id, 'ref_columns']]);
  for (const p of problems) assert.ok(p.message.length > 10 && !/undefined|null/.test(p.message), p.message);
});

test('the server’s problems land on the rows they name', () => {
  const d = draftOf(orders);
  const rev = d.metrics.find((m) => m.name === 'revenue');
  const placed = placeProblems(d, [
    { field: 'metrics.revenue.sql', message: 'does not run' },
    { field: 'synonyms.EMEA.meaning', message: 'too long' },
    { field: 'relationships.0.ref_columns', message: 'no column' },
    { field: 'columns.amount', message: 'too long' },
    { field: 'metrics.gone.sql', message: 'renamed since' },
    { field: '', message: 'too many' },
  ], [d.relationships[0].id]);
  assert.deepEqual(placed.map((p) => [p.kind, p.id, p.part]), [
    ['metrics', rev.id, 'sql'], ['synonyms', d.synonyms[0].id, 'meaning'], ['relationships', d.relationships[0].id, 'ref_columns'],
    ['columns', 'amount', 'description'], ['table', undefined, undefined], ['table', undefined, undefined]]);
});

test('summary and values read as words', () => {
  assert.equal(summary(orders), '2 metrics · 1 synonym · 1 join');
  assert.equal(summary({ metrics: {}, synonyms: {}, relationships: [] }), '');
  assert.equal(formatValue(344), '344');
  assert.equal(formatValue('1234567.50'), '1,234,567.50');
  assert.equal(formatValue(null), 'no value (no rows)');
});
