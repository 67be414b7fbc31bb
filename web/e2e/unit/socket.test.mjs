import { test } from 'node:test';
import assert from 'node:assert/strict';
import { backoffDelay, socketURL, socketProtocols, BACKOFF_MS } from '../../assets/js/socket.js';
import { listOf } from '../../assets/js/api.js';

test('socketURL follows the page protocol, escapes its parameters and carries no key', () => {
  assert.equal(socketURL({ protocol: 'http:', host: '127.0.0.1:8080' }, 'c 1&x'), 'ws://127.0.0.1:8080/ws?conversation_id=c+1%26x');
  assert.equal(socketURL({ protocol: 'https:', host: 'data.example' }, 'c'), 'wss://data.example/ws?conversation_id=c');
  assert.ok(!socketURL({ protocol: 'https:', host: 'h' }, 'c', 'dck_secret').includes('dck_secret'));
});

test('socketProtocols offers datachat.v1 and the key as a subprotocol', () => {
  assert.deepEqual(socketProtocols('dck_AbC-_9'), ['datachat.v1', 'datachat.key.dck_AbC-_9']);
});

test('backoff grows, caps and jitters by ±20 %', () => {
  assert.equal(backoffDelay(0, () => 0.5), BACKOFF_MS[0]);
  assert.equal(backoffDelay(3, () => 0.5), BACKOFF_MS[3]);
  assert.equal(backoffDelay(99, () => 0.5), BACKOFF_MS[BACKOFF_MS.length - 1]);
  assert.equal(backoffDelay(2, () => 0), Math.round(BACKOFF_MS[2] * 0.8));
  assert.equal(backoffDelay(2, () => 1), Math.round(BACKOFF_MS[2] * 1.2));
});

test('listOf accepts arrays and wrapped lists', () => {
  assert.deepEqual(listOf([1], 'x'), [1]);
  assert.deepEqual(listOf({ datasets: [2] }, 'datasets'), [2]);
  assert.deepEqual(listOf(null, 'datasets'), []);
});

test('a message sent while the socket is down is sent on reconnect, and the reopen says so', async () => {
  const { ChatSocket } = await import('../../assets/js/socket.js');
  const sockets = [];
  class FakeWS {
    constructor(url, protocols) { this.url = url; this.protocols = protocols; this.sent = []; this.readyState = 0; sockets.push(this); }
    send(m) { this.sent.push(m); }
    close() { this.readyState = 3; if (this.onclose) this.onclose({ code: 1006 }); }
    open() { this.readyState = 1; this.onopen(); }
  }
  const saved = globalThis.WebSocket;
  globalThis.WebSocket = FakeWS;
  FakeWS.OPEN = 1;
  try {
    const states = [];
    const s = new ChatSocket({ url: 'ws://h/ws', onEvent: () => {}, onState: (st, info) => states.push([st, info]) });
    s.connect();
    sockets[0].open();
    assert.equal(states.at(-1)[1].queued, 0);
    // The connection drops; the user sends before it is back.
    sockets[0].readyState = 3;
    s.ws = null;
    s.send('chat_send', { content: 'hello' }); // queued; it reconnects at once
    assert.equal(sockets.length, 2);
    sockets[1].open();
    const [st, info] = states.at(-1);
    assert.equal(st, 'open');
    assert.equal(info.reopened, true);
    assert.equal(info.queued, 1);
    assert.deepEqual(sockets[1].sent.map((m) => JSON.parse(m)), [{ type: 'chat_send', data: { content: 'hello' } }]);
    s.close();
  } finally {
    globalThis.WebSocket = saved;
  }
});

test('a socket closed because its key was revoked stops reconnecting and says why', async () => {
  const { ChatSocket, CLOSE_REVOKED } = await import('../../assets/js/socket.js');
  const sockets = [];
  class FakeWS {
    constructor(url, protocols) { this.url = url; this.protocols = protocols; this.sent = []; this.readyState = 0; sockets.push(this); }
    send(m) { this.sent.push(m); }
    close() { this.readyState = 3; }
    open() { this.readyState = 1; this.onopen(); }
    serverClose(code, reason) { this.readyState = 3; this.onclose({ code, reason }); }
  }
  const saved = globalThis.WebSocket;
  const savedTimeout = globalThis.setTimeout;
  const timers = [];
  globalThis.WebSocket = FakeWS;
  globalThis.setTimeout = (fn, ms) => { timers.push(ms); return 0; };
  FakeWS.OPEN = 1;
  try {
    const states = [];
    const revoked = [];
    const s = new ChatSocket({ url: 'ws://h/ws', onEvent: () => {}, onState: (st) => states.push(st), onRevoked: (r) => revoked.push(r) });
    s.connect();
    sockets[0].open();
    // A drop for another reason reconnects.
    sockets[0].serverClose(1006, '');
    assert.equal(timers.length, 1);
    assert.equal(states.at(-1), 'reconnecting');
    s.connect();
    sockets[1].open();
    sockets[1].serverClose(CLOSE_REVOKED, 'The API key was revoked. Use another key.');
    assert.deepEqual(revoked, ['The API key was revoked. Use another key.']);
    assert.equal(states.at(-1), 'closed');
    assert.equal(timers.length, 1, 'no reconnect is scheduled after a revocation');
    s.send('chat_send', { content: 'x' });
    assert.equal(sockets.length, 2, 'nothing reconnects on send either');
  } finally {
    globalThis.WebSocket = saved;
    globalThis.setTimeout = savedTimeout;
  }
});
