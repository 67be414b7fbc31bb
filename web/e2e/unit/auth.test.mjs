import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFragment, passwordProblem, loadKey, saveKey, KEY_STORAGE, PASSWORD_MIN, PASSWORD_RULE } from '../../assets/js/auth.js';
import { sameOriginPath } from '../../assets/js/signin.js';
import { socketProtocols } from '../../assets/js/socket.js';

test('readFragment takes sign-in’s parts out of the address and keeps the rest', () => {
  assert.deepEqual(readFragment('#key=dc_abc&c=conv_1'), { key: 'dc_abc', invite: null, signinError: null, rest: 'c=conv_1' });
  assert.deepEqual(readFragment('invite=T0k-_en'), { key: null, invite: 'T0k-_en', signinError: null, rest: '' });
  assert.deepEqual(readFragment('#signin-error=Your%20email%20domain%20is%20not%20allowed.'),
    { key: null, invite: null, signinError: 'Your email domain is not allowed.', rest: '' });
  assert.deepEqual(readFragment(''), { key: null, invite: null, signinError: null, rest: '' });
  assert.deepEqual(readFragment(undefined), { key: null, invite: null, signinError: null, rest: '' });
});

test('readFragment: empty or blank values are absent, values are trimmed, odd input does not throw', () => {
  assert.equal(readFragment('#key=&invite=%20%20').key, null);
  assert.equal(readFragment('#key=&invite=%20%20').invite, null);
  assert.equal(readFragment('#key=%20dc_x%20').key, 'dc_x');
  assert.equal(readFragment('#%E0%A4%A=1&key=k').key, 'k'); // a broken escape elsewhere
  assert.equal(readFragment('#key=a&key=b').key, 'a'); // the first of a repeated one; none is left behind
  assert.equal(readFragment('#key=a&key=b').rest, '');
  assert.equal(readFragment('#admin=users&shared=c2').rest, 'admin=users&shared=c2');
});

test('readFragment: a message carrying markup stays text (the page shows it with textContent)', () => {
  const f = readFragment(`#signin-error=${encodeURIComponent('<img src=x onerror=alert(1)>')}`);
  assert.equal(f.signinError, '<img src=x onerror=alert(1)>');
});

test('passwordProblem says the rule, counting characters as the server does', () => {
  assert.equal(PASSWORD_MIN, 12);
  assert.match(PASSWORD_RULE, /12 characters/);
  assert.equal(passwordProblem('', ''), 'Enter a password.');
  assert.match(passwordProblem('short', 'short'), /at least 12 characters; this one has 5/);
  assert.match(passwordProblem('ééééééééééé', 'ééééééééééé'), /has 11/); // 22 bytes, 11 characters
  assert.equal(passwordProblem('éééééééééééé', 'éééééééééééé'), '');
  assert.match(passwordProblem('😀'.repeat(11), '😀'.repeat(11)), /has 11/); // astral characters count once
  assert.equal(passwordProblem('twelve chars', 'twelve chars'), '');
  assert.match(passwordProblem('twelve chars', 'twelve charz'), /differ/);
  assert.match(passwordProblem('a'.repeat(1025), 'a'.repeat(1025)), /too long: at most 1,024 bytes/);
  assert.equal(passwordProblem('a'.repeat(1024), 'a'.repeat(1024)), '');
  assert.match(passwordProblem('é'.repeat(513), 'é'.repeat(513)), /too long/); // 1,026 bytes
  assert.match(passwordProblem(null, null), /Enter/);
  assert.match(passwordProblem('twelve chars', undefined), /differ/);
});

function storage(initial = {}, { throws = false } = {}) {
  const m = new Map(Object.entries(initial));
  const guard = () => { if (throws) throw new Error('SecurityError'); };
  return {
    m,
    getItem: (k) => { guard(); return m.has(k) ? m.get(k) : null; },
    setItem: (k, v) => { guard(); m.set(k, String(v)); },
    removeItem: (k) => { guard(); m.delete(k); },
  };
}

test('the key is kept in localStorage; one an older page left in sessionStorage moves there', () => {
  const local = storage();
  const session = storage({ [KEY_STORAGE]: 'dc_old' });
  assert.equal(loadKey(local, session), 'dc_old');
  assert.equal(local.m.get(KEY_STORAGE), 'dc_old');
  assert.equal(session.m.has(KEY_STORAGE), false);
  assert.equal(loadKey(local, storage()), 'dc_old');
  saveKey(local, null);
  assert.equal(loadKey(local, storage()), null);
  saveKey(local, 'dc_new');
  assert.equal(loadKey(local, storage({ [KEY_STORAGE]: 'dc_stale' })), 'dc_new');
});

test('storage that refuses (disabled, private mode) keeps nothing and throws nothing', () => {
  const bad = storage({}, { throws: true });
  assert.equal(loadKey(bad, bad), null);
  assert.doesNotThrow(() => saveKey(bad, 'dc_x'));
  assert.doesNotThrow(() => saveKey(bad, null));
  assert.equal(loadKey(null, undefined), null);
});

test('the SSO link is followed only as a path on this origin', () => {
  assert.equal(sameOriginPath('/api/auth/oidc/login'), '/api/auth/oidc/login');
  for (const bad of ['https://evil.example/login', '//evil.example/x', '/\\evil.example', 'javascript:alert(1)', '', null, undefined, 42, { toString: () => '/x' }]) {
    assert.equal(sameOriginPath(bad), '', String(bad));
  }
});

test('signed in by the session cookie, the socket offers no key', () => {
  assert.deepEqual(socketProtocols(null), ['datachat.v1']);
  assert.deepEqual(socketProtocols(''), ['datachat.v1']);
  assert.deepEqual(socketProtocols(undefined), ['datachat.v1']);
});
