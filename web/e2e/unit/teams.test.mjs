import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  formatWhen, formatDay, relTime, count, accountStatus, roleLabel, authLabel, budgetText, parseBudget, parseNames,
  shareLabel, notCopiedText, keyLabel, auditQuery, auditFacts, actorText, usageSummary, BAD_TEXT, AUDIT_KINDS,
} from '../../assets/js/teams.js';

// Whatever the server sends, the page never shows a value in place of text.
const junk = [null, undefined, {}, [], NaN, 'not a date', '', 0, -1, { a: 1 }, Infinity];
const clean = (s, what) => {
  assert.equal(typeof s, 'string', what);
  assert.ok(!BAD_TEXT.test(s), `${what}: ${JSON.stringify(s)}`);
};

test('BAD_TEXT finds what a page must not show, and not ordinary words', () => {
  for (const s of ['null', 'x undefined y', '[object Object]', 'NaN rows', 'Invalid Date']) assert.ok(BAD_TEXT.test(s), s);
  for (const s of ['NULL', 'nullable', 'annulled', 'Nancy', 'undefinedness', 'Unknown']) assert.ok(!BAD_TEXT.test(s), s);
});

test('times read for people, and absent ones are empty', () => {
  const t = Date.UTC(2026, 2, 1, 14, 5, 9);
  assert.match(formatWhen(new Date(t).toISOString()), /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}$/);
  assert.match(formatWhen(t, { seconds: true }), /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/);
  assert.equal(formatDay('2026-03-01T00:00:00Z'), '2026-03-01');
  assert.equal(formatDay('2026-03-01T23:59:59Z'), '2026-03-01');
  const now = Date.UTC(2026, 2, 10);
  assert.equal(relTime(now - 30e3, now), 'just now');
  assert.equal(relTime(now - 5 * 60e3, now), '5 min ago');
  assert.equal(relTime(now - 3 * 3600e3, now), '3 h ago');
  assert.equal(relTime(now - 2 * 86400e3, now), '2 d ago');
  assert.match(relTime(now - 30 * 86400e3, now), /^2026-02-0\d$/);
  for (const v of junk) {
    clean(formatWhen(v), `formatWhen(${String(v)})`);
    clean(formatDay(v), `formatDay(${String(v)})`);
    clean(relTime(v), `relTime(${String(v)})`);
    clean(count(v), `count(${String(v)})`);
  }
  assert.equal(formatWhen(null), '');
  assert.equal(count(1234567), '1,234,567');
  assert.equal(count(0), '0');
  assert.equal(count(null), '');
});

test('an account’s status: disabled, SSO, with a password, or waiting for its invite', () => {
  assert.equal(accountStatus({ disabled_at: '2026-01-02T10:00:00Z', has_password: true }).kind, 'disabled');
  assert.match(accountStatus({ disabled_at: '2026-01-02T10:00:00Z' }).label, /^Disabled 2026-01-0\d$/);
  assert.deepEqual(accountStatus({ sso: true }), { label: 'Signs in with SSO', kind: 'active' });
  assert.deepEqual(accountStatus({ has_password: true }), { label: 'Active', kind: 'active' });
  assert.equal(accountStatus({}).kind, 'pending');
  assert.match(accountStatus({ has_password: false }).label, /No password yet/);
  for (const v of junk) clean(accountStatus(v).label, `accountStatus(${JSON.stringify(v)})`);
  assert.equal(roleLabel('admin'), 'Admin');
  assert.equal(roleLabel('member'), 'Member');
  assert.equal(authLabel('oidc'), 'single sign-on');
  assert.equal(authLabel('api_key'), 'API key');
  for (const v of junk) {
    clean(roleLabel(v), 'roleLabel');
    clean(authLabel(v), 'authLabel');
  }
});

test('token budgets: the server’s default, no limit, or a number; the field is read strictly', () => {
  assert.equal(budgetText(undefined), 'Server default');
  assert.equal(budgetText(null), 'Server default');
  assert.equal(budgetText(0), 'No limit');
  assert.equal(budgetText(50000), '50,000 tokens a day');
  for (const v of junk) clean(budgetText(v), `budgetText(${String(v)})`);
  assert.deepEqual(parseBudget(''), { value: null });
  assert.deepEqual(parseBudget('   '), { value: null });
  assert.deepEqual(parseBudget('0'), { value: 0 });
  assert.deepEqual(parseBudget('50,000'), { value: 50000 });
  assert.deepEqual(parseBudget("1 000 000"), { value: 1000000 });
  assert.deepEqual(parseBudget('1_500'), { value: 1500 });
  for (const bad of ['lots', '-5', '1.5', '1e6', '0x10', '١٢٣', '12abc', '99999999999999999999']) {
    assert.ok(parseBudget(bad).error, bad);
  }
});

test('names typed for a share or a grant: split on commas and spaces, each once', () => {
  assert.deepEqual(parseNames('bob, carol dave;bob\n eve'), ['bob', 'carol', 'dave', 'eve']);
  assert.deepEqual(parseNames(''), []);
  assert.deepEqual(parseNames(null), []);
  assert.deepEqual(parseNames(' , ;'), []);
});

test('shares, copies and keys read as text', () => {
  assert.equal(shareLabel({ everyone: true }), 'Everyone signed in to this server');
  assert.equal(shareLabel({ user: 'bob', everyone: false }), 'bob');
  assert.equal(shareLabel({ user: null }), 'A user');
  assert.equal(notCopiedText({ kind: 'source', name: 'warehouse', reason: 'not granted to you' }), 'Database warehouse: not granted to you');
  assert.equal(notCopiedText({ kind: 'dataset', name: 'big' }), 'Dataset big');
  assert.equal(notCopiedText({ kind: 'widget', name: 'x', reason: 'r' }), 'widget x: r');
  assert.equal(keyLabel({ prefix: 'dc_ab12' }), 'dc_ab12…');
  for (const v of junk) {
    clean(shareLabel(v), `shareLabel(${JSON.stringify(v)})`);
    clean(notCopiedText(v), `notCopiedText(${JSON.stringify(v)})`);
    clean(notCopiedText({ kind: v, name: v, reason: v }), `notCopiedText(fields ${JSON.stringify(v)})`);
    clean(keyLabel(v), 'keyLabel');
    clean(keyLabel({ prefix: v }), 'keyLabel prefix');
  }
});

test('auditQuery sends the filters set, trimmed and escaped, with the cursor and page size', () => {
  assert.equal(auditQuery({}), '');
  assert.equal(auditQuery({ user: ' mia ', kind: '', outcome: 'refused' }), '?user=mia&outcome=refused');
  assert.equal(auditQuery({ source: 'a&b=c', since: '7d' }, 'cur/sor', 10), '?source=a%26b%3Dc&since=7d&cursor=cur%2Fsor&limit=10');
  assert.equal(auditQuery({ nope: 'x', user: null, kind: undefined }), ''); // only the server's filters
  assert.ok(AUDIT_KINDS.includes('source.query') && AUDIT_KINDS.includes('sign_in'));
});

test('an audit event says what it holds, and nothing for fields it lacks', () => {
  const q = auditFacts({ kind: 'source.query', source: 'warehouse', target: 'warehouse', conversation_id: 'conv_1', sql: 'SELECT 1', row_count: 0, duration_ms: 12.4, address: '127.0.0.1' });
  assert.deepEqual(q, [['Source', 'warehouse'], ['Conversation', 'conv_1'], ['SQL', 'SELECT 1'], ['Rows', '0 rows'], ['Took', '12 ms'], ['Address', '127.0.0.1']]);
  assert.deepEqual(auditFacts({ sql: 'SELECT …', sql_truncated: true, row_count: 1, duration_ms: 2500 }).map(([k, v]) => `${k}=${v}`),
    ['SQL=SELECT … … (cut)', 'Rows=1 row', 'Took=2.50 s']);
  assert.deepEqual(auditFacts({ kind: 'sign_in', outcome: 'refused', detail: 'password: wrong password', target: 'mia' }), [['Target', 'mia'], ['Detail', 'password: wrong password']]);
  assert.deepEqual(auditFacts({ row_count: null, duration_ms: null, error: {}, detail: [] }), []);
  for (const v of junk) {
    for (const [, val] of auditFacts({ source: v, target: v, sql: v, row_count: v, duration_ms: v, error: v, detail: v, address: v, request_id: v, conversation_id: v })) clean(val, `auditFacts(${String(v)})`);
    clean(actorText({ user: v }), 'actorText');
  }
  assert.equal(actorText({ user: 'mia' }), 'mia');
  assert.match(actorText({}), /command line/);
});

test('usage is arranged newest day first, with each day’s and each user’s totals', () => {
  const s = usageSummary([
    { user: 'bob', day: '2026-03-01T00:00:00Z', turns: 2, input_tokens: 100, output_tokens: 20 },
    { user: 'amy', day: '2026-03-02T00:00:00Z', turns: 1, input_tokens: 10, output_tokens: 5 },
    { user: 'amy', day: '2026-03-01T00:00:00Z', turns: 3, input_tokens: 300, output_tokens: 30 },
    { user_id: 'usr_9', day: '2026-03-02T00:00:00Z', turns: 1, input_tokens: 1, output_tokens: 1 },
    null, 'x', { user: 'bad', day: 'not a day' },
  ]);
  assert.deepEqual(s.rows.map((r) => `${r.day} ${r.user} ${r.total}`), ['2026-03-02 amy 15', '2026-03-02 usr_9 2', '2026-03-01 amy 330', '2026-03-01 bob 120']);
  assert.deepEqual(s.perDay, [{ day: '2026-03-01', total: 450 }, { day: '2026-03-02', total: 17 }]);
  assert.equal(s.max, 450);
  assert.deepEqual(s.perUser.map((u) => `${u.user}:${u.turns}:${u.total}`), ['amy:4:345', 'bob:2:120', 'usr_9:1:2']);
  assert.deepEqual(usageSummary(null), { rows: [], perDay: [], max: 0, perUser: [] });
  assert.deepEqual(usageSummary({ usage: [] }).rows, []);
  const odd = usageSummary([{ user: 'x', day: '2026-03-01', turns: 'many', input_tokens: null, output_tokens: undefined }]);
  assert.deepEqual(odd.rows, [{ day: '2026-03-01', user: 'x', turns: 0, input: 0, output: 0, total: 0 }]);
});
