import { test } from 'node:test';
import assert from 'node:assert/strict';
import { tokenizeSQL } from '../../assets/js/sqlhl.js';

test('tokens join back to the input', () => {
  for (const q of [
    "SELECT a, count(*) AS n FROM t WHERE s = 'it''s' AND x >= 1.5e3 -- done\nGROUP BY 1 ORDER BY n DESC LIMIT 20",
    'select "Weird ""col""" from x /* unclosed',
    "SELECT '<script>alert(1)</script>'",
    '',
  ]) {
    assert.equal(tokenizeSQL(q).map((t) => t.text).join(''), q);
  }
});

test('token types', () => {
  const types = Object.fromEntries(tokenizeSQL("SELECT count(x), 'a' FROM t1 -- c").filter((t) => t.type !== 'ws').map((t) => [t.text, t.type]));
  assert.equal(types.SELECT, 'kw');
  assert.equal(types.count, 'fn');
  assert.equal(types.x, 'id');
  assert.equal(types["'a'"], 'str');
  assert.equal(types.FROM, 'kw');
  assert.equal(types.t1, 'id');
  assert.equal(types['-- c'], 'com');
});
