#!/usr/bin/env node
// A stand-in for `datachat serve`, for working on the page and its browser test
// without the Go server: it serves web/ from disk and fakes the server's HTTP API
// (conversations, datasets, documents) and WebSocket with a scripted assistant.
// It is not the product and not what CI runs (CI runs run.mjs against the real
// server with a scripted LLM fake); it only has to speak the same protocol.
//
//   node web/e2e/mock-server.mjs            # PORT (default 8099), MOCK_KEY (default "test-key")
//
// What the scripted assistant does, by the words in the message:
//   "stop" / "long"        streams a long answer slowly (to test Stop)
//   "confirm" / "delete"   asks for confirmation (execute_sql with estimated_rows)
//   "error"                answers chat_error with reason and suggested action
//   "cite" / "document"    answers with [1] citations and sources
//   "html"                 answers with hostile Markdown (XSS attempts)
//   "follow-up"            counts the rows of the first dataset (execute_sql)
//   anything else          one failing and one working execute_sql over the
//                          first uploaded CSV, then a Markdown answer
// A message starting with "slow:" makes the non-long answers stream slowly too.
//
// Accounts, sessions, the admin API and sharing (mock-teams.mjs): user
// "browser" signs in with MOCK_KEY; the first admin's setup link is printed
// at the start ("setup URL: …#invite=TOKEN").

import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { WebSocketServer } from 'ws';
import { Teams } from './mock-teams.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const WEB = path.resolve(here, '..');
const PORT = Number(process.env.PORT || 8099);
const KEY = process.env.MOCK_KEY || 'test-key';
const TYPES = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8', '.md': 'text/markdown; charset=utf-8', '.svg': 'image/svg+xml' };

const conversations = new Map(); // id → {id,owner,title,created_at,updated_at,messages,datasets,documents,pending,turn}
const teams = new Teams({ key: KEY, base: () => `http://127.0.0.1:${PORT}` });
const id = (p) => `${p}_${crypto.randomBytes(6).toString('hex')}`;
const now = () => new Date().toISOString();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function send(res, status, body, headers = {}) {
  const data = body === null ? '' : JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json', 'X-Request-ID': id('req'), ...headers });
  res.end(data);
}
const fail = (res, status, type, message) => send(res, status, { error: { message, type } });

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function parseMultipart(buf, contentType) {
  const m = /boundary=(?:"([^"]+)"|([^;]+))/i.exec(contentType || '');
  if (!m) return null;
  const boundary = Buffer.from(`--${m[1] || m[2]}`);
  let start = buf.indexOf(boundary);
  while (start !== -1) {
    const next = buf.indexOf(boundary, start + boundary.length);
    if (next === -1) break;
    const part = buf.subarray(start + boundary.length + 2, next - 2);
    const sep = part.indexOf('\r\n\r\n');
    const head = part.subarray(0, sep).toString();
    if (/name="file"/.test(head)) {
      const fn = /filename="([^"]*)"/.exec(head);
      return { filename: fn ? fn[1] : 'upload', data: part.subarray(sep + 4) };
    }
    start = next;
  }
  return null;
}

function parseCSV(text) {
  const rows = [];
  let row = [];
  let cur = '';
  let q = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (q) {
      if (c === '"' && text[i + 1] === '"') { cur += '"'; i++; } else if (c === '"') q = false; else cur += c;
    } else if (c === '"') q = true;
    else if (c === ',') { row.push(cur); cur = ''; } else if (c === '\n' || c === '\r') {
      if (c === '\r' && text[i + 1] === '\n') i++;
      row.push(cur); cur = '';
      if (row.some((x) => x !== '')) rows.push(row);
      row = [];
    } else cur += c;
  }
  if (cur || row.length) { row.push(cur); rows.push(row); }
  return rows;
}

function tableName(file) {
  let n = file.replace(/\.(parquet|csv|tsv)(\.\w+)?$/i, '').toLowerCase().replace(/[^a-z0-9_]+/g, '_').replace(/^_+|_+$/g, '');
  if (/^\d/.test(n)) n = `t_${n}`;
  return n || 'dataset';
}

function datasetFromCSV(conv, filename, text) {
  const rows = parseCSV(text);
  const header = rows.shift() || [];
  const columns = header.map((name, i) => {
    const vals = rows.map((r) => r[i]).filter((v) => v !== '' && v !== 'NA' && v !== undefined);
    const type = vals.length && vals.every((v) => /^-?\d+$/.test(v)) ? 'integer' : vals.length && vals.every((v) => /^-?\d*\.?\d+$/.test(v)) ? 'float' : 'text';
    return { name, type, sql_type: { integer: 'BIGINT', float: 'DOUBLE', text: 'VARCHAR' }[type] };
  });
  let name = tableName(filename);
  const taken = new Set(conv.datasets.map((d) => d.name));
  for (let k = 2; taken.has(name); k++) name = `${tableName(filename)}_${k}`;
  return { id: id('ds'), conversation_id: conv.id, name, source: filename, format: 'parquet', columns, row_count: rows.length, bytes: Buffer.byteLength(text), created_at: now(), _rows: rows };
}

function publicDataset(d) {
  const { _rows, ...rest } = d;
  return rest;
}

function detail(c) {
  return {
    id: c.id, title: c.title, created_at: c.created_at, updated_at: c.updated_at,
    messages: c.messages,
    pending_confirmation: c.pending ? { id: c.pending.id, conversation_id: c.id, action: c.pending.action, parameters: c.pending.parameters, explanation: c.pending.explanation, status: 'pending' } : null,
  };
}

/** copyConversation is POST /api/shared/{id}/copy's copy, the viewer's now. */
function copyConversation(c, owner) {
  const { turn, pending, ...rest } = c;
  const copy = structuredClone(rest);
  Object.assign(copy, { id: id('conv'), owner, created_at: now(), updated_at: now(), sources: [], turn: null, pending: null });
  conversations.set(copy.id, copy);
  return { conversation: { id: copy.id, title: copy.title, created_at: copy.created_at, updated_at: copy.updated_at }, sources: c.sources || [] };
}

const server = http.createServer(async (req, res) => {
  const url = new URL(req.url, 'http://x');
  const p = url.pathname;
  try {
    if (req.method === 'GET' && (p === '/' || p.startsWith('/assets/'))) {
      const file = p === '/' ? path.join(WEB, 'index.html') : path.join(WEB, path.normalize(p));
      if (!file.startsWith(WEB) || !fs.existsSync(file) || fs.statSync(file).isDirectory()) return fail(res, 404, 'not_found', 'Not found.');
      res.writeHead(200, { 'Content-Type': TYPES[path.extname(file)] || 'application/octet-stream', 'Cache-Control': 'no-cache' });
      return res.end(fs.readFileSync(file));
    }
    if (p === '/healthz') return send(res, 200, { status: 'ok' });
    let body = null;
    const ctx = {
      req, res, url, p, send, fail, conversations,
      body: async () => (body === null ? (body = await readBody(req)) : body),
      detail: (c) => ({ ...detail(c), datasets: c.datasets.map(publicDataset), documents: c.documents, sources: (c.sources || []).map((name) => ({ name })) }),
      copy: copyConversation,
    };
    if (p.startsWith('/api/auth/') && await teams.route({ ...ctx, who: null })) return;
    const who = teams.who(req, url);
    if (!who || who.error) return fail(res, 401, 'unauthorized', who ? who.error : 'Sign in first: send an API key, or sign in on the page.');
    if (who.cookie && req.method !== 'GET' && req.method !== 'HEAD' && req.headers['sec-fetch-site'] && req.headers['sec-fetch-site'] !== 'same-origin') {
      return fail(res, 403, 'forbidden', 'cross-origin request detected from Sec-Fetch-Site header');
    }
    if (await teams.route({ ...ctx, who })) return;
    const mine = (c) => c && c.owner === who.user.name;
    if (p === '/api/conversations' && req.method === 'GET') {
      return send(res, 200, { conversations: [...conversations.values()].filter(mine).map((c) => ({ id: c.id, title: c.title, created_at: c.created_at, updated_at: c.updated_at })) });
    }
    if (p === '/api/sources' && req.method === 'GET') return send(res, 200, { sources: [] });
    if (p === '/api/conversations' && req.method === 'POST') {
      const body = await ctx.body();
      const j = body.length ? JSON.parse(body) : {};
      const c = { id: id('conv'), owner: who.user.name, title: j.title || 'New conversation', created_at: now(), updated_at: now(), messages: [], datasets: [], documents: [], pending: null, turn: null };
      conversations.set(c.id, c);
      return send(res, 201, { id: c.id, title: c.title, created_at: c.created_at, updated_at: c.updated_at });
    }
    if (p === '/api/examples' || p.startsWith('/api/examples/')) return examplesRoute(req, res, p, who);
    const m = /^\/api\/conversations\/([^/]+)(?:\/(datasets|documents|dictionary|sql|sources)(?:\/([^/]+))?)?$/.exec(p);
    if (!m) return fail(res, 404, 'not_found', 'Not found.');
    const c = conversations.get(m[1]);
    if (!mine(c)) return fail(res, 404, 'not_found', 'Conversation not found.');
    const [, , kind, itemId] = m;
    if (!kind) {
      if (req.method === 'GET') return send(res, 200, detail(c));
      if (req.method === 'PATCH') {
        const j = JSON.parse(await ctx.body());
        if (j.title === undefined && j.notes === undefined) return fail(res, 400, 'invalid_request', 'Send {"title": "…"}, {"notes": "…"} or both.');
        if (j.title !== undefined && !String(j.title).trim()) return fail(res, 400, 'invalid_request', 'title must not be empty.');
        if (j.title !== undefined) {
          c.title = String(j.title).trim();
          c.updated_at = now();
        }
        if (j.notes !== undefined) c.notes = String(j.notes).trim();
        return send(res, 200, { id: c.id, title: c.title, notes: c.notes || '', created_at: c.created_at, updated_at: c.updated_at });
      }
      if (req.method === 'DELETE') {
        conversations.delete(c.id);
        res.writeHead(204);
        return res.end();
      }
    }
    if (kind === 'sources' && req.method === 'GET') return send(res, 200, { sources: (c.sources || []).map((name) => ({ name })) });
    if (kind === 'sql' && req.method === 'POST') {
      const j = JSON.parse(await ctx.body());
      const r = countQuery(c, String(j.query || ''));
      if (r.error) return fail(res, 400, 'invalid_request', r.error);
      if (j.keep) {
        const callId = id('call');
        c.messages.push({ id: id('msg'), conversation_id: c.id, role: 'user', content: '', status: 'complete', input_tokens: 0, output_tokens: 0, created_at: now(), updated_at: now(),
          tool_calls: [{ id: id('tc'), call_id: callId, tool: 'execute_sql', args: { query: j.query }, ok: true, result: resultText(r.columns, r.rows), duration_ms: 2 }] });
        c.updated_at = now();
      }
      return send(res, 200, { ...r, row_count: r.rows.length, truncated: false, elapsed_ms: 1.2 });
    }
    if (kind === 'dictionary' && req.method === 'GET') return send(res, 200, { notes: c.notes || '', datasets: {} });
    if (kind === 'dictionary' && req.method === 'POST') {
      const body = await ctx.body();
      const f = /multipart/.test(req.headers['content-type'] || '') ? parseMultipart(body, req.headers['content-type']) : { data: body };
      if (!f) return fail(res, 400, 'invalid_request', 'No file: upload it as multipart field "file".');
      const d = parseSimpleYAML(f.data.toString('utf8'));
      const unknown = Object.keys(d.datasets || {}).filter((n) => !c.datasets.some((x) => x.name === n));
      if (unknown.length) return fail(res, 400, 'invalid_request', `The data dictionary does not fit this conversation: unknown table "${unknown[0]}".`);
      if (typeof d.notes === 'string') c.notes = d.notes;
      for (const [name, dd] of Object.entries(d.datasets || {})) {
        const ds = c.datasets.find((x) => x.name === name);
        if (typeof dd.description === 'string') ds.description = dd.description;
        for (const [col, text] of Object.entries(dd.columns || {})) {
          const cd = ds.columns.find((x) => x.name === col);
          if (cd) cd.description = text;
        }
      }
      return send(res, 200, { notes: c.notes || '', datasets: c.datasets.map(publicDataset) });
    }
    if (kind === 'datasets') {
      if (req.method === 'GET') return send(res, 200, { datasets: c.datasets.map(publicDataset) });
      if (req.method === 'PATCH') {
        const d = c.datasets.find((x) => x.id === itemId);
        if (!d) return fail(res, 404, 'not_found', 'dataset not found');
        const j = JSON.parse(await ctx.body());
        if (j.description !== undefined) d.description = String(j.description).trim();
        for (const [col, text] of Object.entries(j.columns || {})) {
          const cd = d.columns.find((x) => x.name === col);
          if (!cd) return fail(res, 400, 'invalid_request', `table ${d.name} has no column "${col}"`);
          cd.description = String(text).trim() || undefined;
        }
        return send(res, 200, publicDataset(d));
      }
      if (req.method === 'DELETE') {
        c.datasets = c.datasets.filter((d) => d.id !== itemId);
        res.writeHead(204);
        return res.end();
      }
      if (req.method === 'POST') {
        const body = await ctx.body();
        if (/multipart/.test(req.headers['content-type'] || '')) {
          const f = parseMultipart(body, req.headers['content-type']);
          if (!f) return fail(res, 400, 'invalid_request', 'Multipart field "file" is missing.');
          if (!/\.(csv|tsv)$/i.test(f.filename)) return fail(res, 400, 'invalid_request', `Unsupported file type: ${f.filename}. Upload CSV, TSV or Parquet.`);
          await sleep(300);
          const d = datasetFromCSV(c, f.filename, f.data.toString('utf8'));
          c.datasets.push(d);
          return send(res, 201, publicDataset(d));
        }
        const j = JSON.parse(body || '{}');
        if (!/^https?:\/\//.test(j.url || '')) return fail(res, 400, 'invalid_request', 'url must be an http(s) URL.');
        if (/private|localhost|127\./.test(j.url)) return fail(res, 400, 'invalid_request', 'Refusing to load from a private address.');
        const file = decodeURIComponent(j.url.split('/').pop() || 'remote.csv');
        const d = datasetFromCSV(c, file, 'city,population\nParis,2100000\nLyon,520000\nLille,236000\n');
        c.datasets.push(d);
        return send(res, 201, publicDataset(d));
      }
    }
    if (kind === 'documents') {
      if (req.method === 'GET') return send(res, 200, { documents: c.documents });
      if (req.method === 'DELETE') {
        c.documents = c.documents.filter((d) => d.id !== itemId);
        res.writeHead(204);
        return res.end();
      }
      if (req.method === 'POST') {
        const f = parseMultipart(await ctx.body(), req.headers['content-type']);
        if (!f) return fail(res, 400, 'invalid_request', 'Multipart field "file" is missing.');
        const pages = /\.pdf$/i.test(f.filename) ? Math.max(1, (f.data.toString('latin1').match(/\/Type\s*\/Page[^s]/g) || []).length) : 1;
        const d = { id: id('doc'), conversation_id: c.id, name: f.filename, media_type: 'application/octet-stream', pages, chunks: Math.max(1, Math.ceil(f.data.length / 2000)), bytes: f.data.length, metadata: {}, created_at: now() };
        c.documents.push(d);
        return send(res, 201, d);
      }
    }
    return fail(res, 404, 'not_found', 'Not found.');
  } catch (err) {
    console.error(err);
    fail(res, 500, 'internal', 'Internal error.');
  }
});

/** countQuery runs the only SQL this mock knows: SELECT count(*) … FROM a dataset. */
function countQuery(c, query) {
  const m = /^\s*SELECT\s+count\(\*\)(?:\s+AS\s+(\w+))?\s+FROM\s+(\w+)\s*;?\s*$/i.exec(query);
  if (!m) return { error: 'This mock runs only SELECT count(*) [AS name] FROM table.' };
  const d = c.datasets.find((x) => x.name === m[2]);
  if (!d) return { error: `Catalog Error: Table with name ${m[2]} does not exist!` };
  return { columns: [{ name: m[1] || 'count_star()', type: 'integer', sql_type: 'BIGINT' }], rows: [[d.row_count]] };
}

// parseSimpleYAML reads the block maps of scalars a dictionary file is made
// of (and one-line {k: v} maps): enough for the browser test's files.
function parseSimpleYAML(text) {
  const root = {};
  const stack = [{ indent: -1, obj: root }];
  for (const raw of text.split('\n')) {
    if (!raw.trim() || raw.trim().startsWith('#')) continue;
    const indent = raw.length - raw.trimStart().length;
    const m = /^\s*("[^"]*"|[^:]+):\s*(.*)$/.exec(raw);
    if (!m) continue;
    const key = m[1].startsWith('"') ? JSON.parse(m[1]) : m[1].trim();
    while (stack[stack.length - 1].indent >= indent) stack.pop();
    const parent = stack[stack.length - 1].obj;
    const value = m[2].trim();
    const flow = /^\{\s*([^:]+):\s*(.*?)\s*\}$/.exec(value);
    if (flow) parent[key] = { [flow[1].trim()]: flow[2] };
    else if (value) parent[key] = value.replace(/^'(.*)'$/, '$1');
    else {
      parent[key] = {};
      stack.push({ indent, obj: parent[key] });
    }
  }
  return root;
}

// Verified examples: marks on answers' SQL cards, kept for the one user.
const examples = [];
async function examplesRoute(req, res, p, who) {
  if (req.method === 'GET' && p === '/api/examples') return send(res, 200, { examples });
  if (req.method === 'DELETE') {
    const i = examples.findIndex((e) => `/api/examples/${e.id}` === p);
    if (i < 0) return fail(res, 404, 'not_found', 'example not found');
    examples.splice(i, 1);
    res.writeHead(204);
    return res.end();
  }
  if (req.method !== 'POST' || p !== '/api/examples') return fail(res, 404, 'not_found', 'Not found.');
  const j = JSON.parse(await readBody(req));
  const c = conversations.get(j.conversation_id);
  if (!c || c.owner !== who.user.name) return fail(res, 404, 'not_found', 'conversation not found');
  const at = c.messages.findIndex((m) => m.id === j.message_id);
  const tc = at >= 0 && (c.messages[at].tool_calls || []).find((t) => t.call_id === j.call_id);
  if (!tc) return fail(res, 404, 'not_found', 'The answer has no such SQL query.');
  const question = (c.messages.slice(0, at).reverse().find((m) => m.role === 'user') || {}).content || '';
  let result;
  if (j.sql !== undefined) {
    const r = countQuery(c, String(j.sql));
    if (r.error) return fail(res, 400, 'invalid_request', r.error);
    result = { ...r, row_count: r.rows.length };
  }
  const ex = { id: id('ex'), question, sql: j.sql || tc.args.query, verdict: j.verdict, result, tables: c.datasets.map((d) => ({ name: d.name, columns: [] })),
    conversation_id: c.id, message_id: j.message_id, call_id: j.call_id, created_at: now() };
  const old = examples.findIndex((e) => e.message_id === ex.message_id && e.call_id === ex.call_id);
  if (old >= 0) examples.splice(old, 1);
  examples.unshift(ex);
  return send(res, 201, ex);
}

// ---------- WebSocket ----------

// Selects datachat.v1, as the server does: never echoes the key.
const wss = new WebSocketServer({ noServer: true, handleProtocols: (protocols) => (protocols.has('datachat.v1') ? 'datachat.v1' : false) });
server.on('upgrade', (req, socket, head) => {
  const url = new URL(req.url, 'http://x');
  const c = conversations.get(url.searchParams.get('conversation_id') || '');
  const who = teams.who(req, url);
  const ok = who && !who.error;
  // A cookie's upgrade must come from this server's own page.
  const foreign = ok && who.cookie && req.headers.origin !== `http://${req.headers.host}`;
  if (url.pathname !== '/ws' || !ok || foreign || !c || c.owner !== who.user.name) {
    socket.write(`HTTP/1.1 ${!ok ? '401 Unauthorized' : foreign ? '403 Forbidden' : '404 Not Found'}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`);
    socket.destroy();
    return;
  }
  wss.handleUpgrade(req, socket, head, (ws) => {
    const entry = { ws, user: who.user, cred: who.cred };
    teams.sockets.add(entry);
    ws.on('close', () => teams.sockets.delete(entry));
    session(ws, c);
  });
});

function session(ws, c) {
  const emit = (type, data) => ws.readyState === 1 && ws.send(JSON.stringify({ type, data }));
  if (c.pending) emit('confirmation_required', { id: c.pending.id, action: c.pending.action, parameters: c.pending.parameters, explanation: c.pending.explanation });
  ws.on('message', (raw) => {
    let msg;
    try {
      msg = JSON.parse(raw);
    } catch {
      return emit('chat_error', { message: 'Messages must be JSON objects {"type", "data"}.' });
    }
    const d = msg.data || {};
    if (msg.type === 'chat_send') {
      if (c.turn) return emit('chat_error', { message: 'A reply is still being written in this conversation; wait for it or stop it first.' });
      if (c.pending) return emit('chat_error', { message: 'An action is waiting for your approval.' });
      runTurn(c, emit, String(d.content || ''));
    } else if (msg.type === 'chat_cancel') {
      if (c.turn) c.turn.cancelled = true;
      else if (c.pending) {
        const a = c.messages.find((x) => x.id === c.pending.messageId);
        c.pending = null;
        if (a) a.status = 'cancelled';
        emit('chat_complete', { message_id: a && a.id, status: 'cancelled', input_tokens: 0, output_tokens: 0, total_tokens: 0, sources: [] });
      }
    } else if (msg.type === 'confirm_action') {
      if (!c.pending || c.pending.id !== d.id) return emit('chat_error', { message: 'No such pending confirmation.' });
      resumeTurn(c, emit, !!d.approved, d.note || '');
    } else emit('chat_error', { message: `Unknown message type "${msg.type}".` });
  });
  ws.on('close', () => {
    if (c.turn) c.turn.cancelled = true; // a dropped socket ends a streaming turn
  });
}

function words(text) {
  return text.match(/\S+\s*|\s+/g) || [];
}

async function stream(c, emit, a, text, delay) {
  for (const w of words(text)) {
    if (c.turn && c.turn.cancelled) return false;
    a.content += w;
    // The answer's parts in the order they streamed, as the server stores them.
    const last = (a.parts = a.parts || [])[a.parts.length - 1];
    if (last && last.type === 'text') last.text += w;
    else a.parts.push({ type: 'text', text: w });
    emit('chat_token', { token: w });
    await sleep(delay);
  }
  return !(c.turn && c.turn.cancelled);
}

function finish(c, emit, a, status, sources = [], checks = []) {
  a.status = status;
  if (sources.length) a.sources = sources;
  if (checks.length) a.number_checks = checks;
  a.input_tokens = 812 + a.content.length;
  a.output_tokens = Math.ceil(a.content.length / 4);
  teams.turnUsed(c.owner, a.input_tokens, a.output_tokens);
  c.turn = null;
  c.updated_at = now();
  emit('chat_complete', { message_id: a.id, status, input_tokens: a.input_tokens, output_tokens: a.output_tokens, total_tokens: a.input_tokens + a.output_tokens, sources, number_checks: checks });
}

/**
 * numberChecks checks the answer's numbers as the server's checker would,
 * for the ones this mock writes: each is found in the result (row, column)
 * or flagged. Offsets count the characters of the answer's text.
 */
function numberChecks(a, callId, result) {
  const checks = [];
  for (const m of a.content.matchAll(/\d[\d,]*(?:\.\d+)?/g)) {
    const v = Number(m[0].replace(/,/g, ''));
    let row = -1;
    let col = -1;
    result.rows.forEach((r, i) => r.forEach((x, j) => { if (row < 0 && x === v) { row = i; col = j; } }));
    const start = Array.from(a.content.slice(0, m.index)).length;
    checks.push(row >= 0
      ? { start, end: start + m[0].length, text: m[0], value: v, status: 'matched', source: { tool_call_id: callId, row, column: col } }
      : { start, end: start + m[0].length, text: m[0], value: v, status: 'unmatched' });
  }
  return checks;
}

function sqlResult(c) {
  const d = c.datasets[0];
  if (!d) return { query: 'SELECT 1 AS answer', columns: [{ name: 'answer', type: 'integer', sql_type: 'INTEGER' }], rows: [[1]] };
  const cat = d.columns.findIndex((x) => x.type === 'text');
  const num = d.columns.findIndex((x) => x.type !== 'text');
  if (cat === -1 || num === -1) return { query: `SELECT count(*) AS n FROM ${d.name}`, columns: [{ name: 'n', type: 'integer', sql_type: 'BIGINT' }], rows: [[d.row_count]] };
  const groups = new Map();
  for (const r of d._rows) {
    const k = r[cat] === '' || r[cat] === 'NA' ? null : r[cat];
    const g = groups.get(k) || { n: 0, sum: 0, cnt: 0 };
    g.n++;
    const v = Number(r[num]);
    if (r[num] !== '' && Number.isFinite(v)) { g.sum += v; g.cnt++; }
    groups.set(k, g);
  }
  const cn = d.columns[cat].name;
  const nn = d.columns[num].name;
  const rows = [...groups.entries()].map(([k, g]) => [k, g.n, g.cnt ? Math.round((g.sum / g.cnt) * 100) / 100 : null]).sort((x, y) => y[1] - x[1]);
  return {
    query: `SELECT ${cn}, count(*) AS n, round(avg(${nn}), 2) AS avg_${nn}\nFROM ${d.name}\nGROUP BY ${cn}\nORDER BY n DESC\nLIMIT 1000`,
    columns: [{ name: cn, type: 'text', sql_type: 'VARCHAR' }, { name: 'n', type: 'integer', sql_type: 'BIGINT' }, { name: `avg_${nn}`, type: 'float', sql_type: 'DOUBLE' }],
    rows,
  };
}

function resultText(columns, rows) {
  return `${columns.map((x) => x.name).join(' | ')}\n${rows.map((r) => r.map((v) => (v === null ? 'NULL' : String(v))).join(' | ')).join('\n')}\n(${rows.length} row${rows.length === 1 ? '' : 's'})`;
}

async function runSQL(c, emit, a, query, result, fails) {
  const callId = id('call');
  const tc = { id: id('tc'), message_id: a.id, seq: a.tool_calls.length, call_id: callId, tool: 'execute_sql', args: { query }, ok: !fails, result: '', started_at: now(), duration_ms: 0 };
  emit('tool_call_start', { id: callId, tool: 'execute_sql', args: { query } });
  (a.parts = a.parts || []).push({ type: 'tool_call', call_id: callId });
  await sleep(350);
  if (fails) {
    tc.error = fails;
    tc.result = `Error: ${fails}`;
    tc.duration_ms = 3;
    a.tool_calls.push(tc);
    emit('tool_call_result', { id: callId, tool: 'execute_sql', ok: false, content: tc.result, error: fails });
    return;
  }
  tc.result = resultText(result.columns, result.rows);
  tc.duration_ms = 14;
  a.tool_calls.push(tc);
  emit('tool_call_result', { id: callId, tool: 'execute_sql', ok: true, content: tc.result, columns: result.columns, rows: result.rows, row_count: result.rows.length, truncated: false, elapsed_ms: 13.7 });
  return callId;
}

async function runTurn(c, emit, content) {
  const slow = /^slow:/i.test(content);
  const delay = slow ? 120 : 18;
  c.messages.push({ id: id('msg'), conversation_id: c.id, role: 'user', content, status: 'complete', input_tokens: 0, output_tokens: 0, created_at: now(), updated_at: now(), tool_calls: [] });
  const a = { id: id('msg'), conversation_id: c.id, role: 'assistant', content: '', status: 'streaming', input_tokens: 0, output_tokens: 0, created_at: now(), updated_at: now(), tool_calls: [] };
  c.messages.push(a);
  c.turn = { cancelled: false, message: a };
  c.updated_at = now();
  await sleep(250);

  if (/\b(stop|long)\b/i.test(content)) {
    const text = Array.from({ length: 60 }, (_, i) => `Sentence ${i + 1} of a long and careful answer about the data, written slowly so that it can be stopped.`).join(' ');
    const done = await stream(c, emit, a, text, 90);
    return finish(c, emit, a, done ? 'complete' : 'cancelled');
  }
  if (/\berror\b/i.test(content)) {
    a.status = 'error';
    a.error = 'The language model request failed.';
    a.error_reason = 'Gemini answered 401: API key not valid.';
    a.error_suggested_action = 'Check GEMINI_API_KEY and restart datachat.';
    c.turn = null;
    return emit('chat_error', { message: a.error, reason: a.error_reason, suggested_action: a.error_suggested_action });
  }
  if (/\b(confirm|delete|everything)\b/i.test(content)) {
    await stream(c, emit, a, 'That query reads every row, so I will ask first. ', delay);
    const q = `SELECT *\nFROM ${c.datasets[0] ? c.datasets[0].name : 'data'}\nORDER BY 1`;
    c.pending = { id: id('cf'), messageId: a.id, action: 'execute_sql', parameters: { query: q, estimated_rows: c.datasets[0] ? c.datasets[0].row_count : 1200 }, explanation: 'This reads the whole table, which may be slow. Run it?' };
    a.status = 'awaiting_confirmation';
    c.turn = null;
    return emit('confirmation_required', { id: c.pending.id, action: 'execute_sql', parameters: c.pending.parameters, explanation: c.pending.explanation });
  }
  if (/\b(cite|document|documents|sources?)\b/i.test(content)) {
    const doc = c.documents[0] ? c.documents[0].name : 'report.pdf';
    const sources = [
      { id: 'ch1', text: 'Penguin body mass varies by species; Gentoo penguins are the heaviest, at about 5 kg on average.', metadata: { document: doc, document_id: 'd1', page: 3 }, distance: 0.21, score: 0.79 },
      { id: 'ch2', text: 'Measurements were taken on three islands in the Palmer Archipelago between 2007 and 2009.', metadata: { document: doc, document_id: 'd1', page: 1 }, distance: 0.33, score: 0.67 },
    ];
    const ok = await stream(c, emit, a, 'According to the report, **Gentoo** penguins are the heaviest [1]. The data was collected on three islands between 2007 and 2009 [2].', delay);
    return finish(c, emit, a, ok ? 'complete' : 'cancelled', sources);
  }
  if (/\bhtml\b/i.test(content)) {
    const ok = await stream(c, emit, a, 'Hostile: <img src=x onerror=alert(1)> and [click me](javascript:alert(1)) and <script>alert(2)</script>\n\n| a | b |\n|---|---|\n| <script>alert(3)</script> | <b>bold?</b> |\n', delay);
    return finish(c, emit, a, ok ? 'complete' : 'cancelled');
  }
  if (/\bfollow-up\b/i.test(content)) {
    const d = c.datasets[0];
    await stream(c, emit, a, 'Counting the rows of the table. ', delay);
    await runSQL(c, emit, a, `SELECT count(*) AS n FROM ${d ? d.name : 'data'}`, { columns: [{ name: 'n', type: 'integer', sql_type: 'BIGINT' }], rows: [[d ? d.row_count : 0]] }, null);
    const ok = await stream(c, emit, a, `It holds ${d ? d.row_count : 0} rows.`, delay);
    return finish(c, emit, a, ok ? 'complete' : 'cancelled');
  }
  await stream(c, emit, a, 'Let me look at the data. ', delay);
  const r = sqlResult(c);
  const bad = r.query.replace(/count\(\*\) AS n/, 'count(species_name) AS n');
  await runSQL(c, emit, a, bad, null, c.datasets[0] ? 'Binder Error: Referenced column "species_name" not found in FROM clause!' : null);
  if (c.turn.cancelled) return finish(c, emit, a, 'cancelled');
  const callId = await runSQL(c, emit, a, r.query, r, null);
  if (c.turn.cancelled) return finish(c, emit, a, 'cancelled');
  const top = r.rows[0];
  const text = `\n\nHere is what I found:\n\n- **${r.rows.length}** groups in total\n- The largest is **${top ? top[0] : '?'}** with ${top ? top[1] : 0} rows, the heaviest weigh about 9,999 g\n\n| ${r.columns.map((x) => x.name).join(' | ')} |\n|${r.columns.map(() => '---').join('|')}|\n${r.rows.slice(0, 5).map((x) => `| ${x.map((v) => (v === null ? 'NULL' : v)).join(' | ')} |`).join('\n')}\n\nThe query used \`GROUP BY\`; see the card above for the full result.`;
  const ok = await stream(c, emit, a, text, delay);
  finish(c, emit, a, ok ? 'complete' : 'cancelled', [], ok ? numberChecks(a, callId, r) : []);
}

async function resumeTurn(c, emit, approved, note) {
  const p = c.pending;
  c.pending = null;
  const a = c.messages.find((x) => x.id === p.messageId);
  a.status = 'streaming';
  c.turn = { cancelled: false, message: a };
  if (!approved) {
    const ok = await stream(c, emit, a, `\n\nUnderstood, I did not run it${note ? ` (your note: “${note}”)` : ''}.`, 18);
    return finish(c, emit, a, ok ? 'complete' : 'cancelled');
  }
  const d = c.datasets[0];
  const rows = d ? d._rows.slice(0, 50).map((r) => r.map((v, i) => (v === '' || v === 'NA' ? null : d.columns[i].type === 'text' ? v : Number(v)))) : [[1]];
  const cols = d ? d.columns : [{ name: 'x', type: 'integer', sql_type: 'INTEGER' }];
  await runSQL(c, emit, a, p.parameters.query, { columns: cols, rows }, null);
  const ok = await stream(c, emit, a, `\n\nDone: the query ran${note ? ` (noted: “${note}”)` : ''} and returned ${rows.length} rows.`, 18);
  finish(c, emit, a, ok ? 'complete' : 'cancelled');
}

server.listen(PORT, '127.0.0.1', () => {
  console.log(`mock datachat on http://127.0.0.1:${PORT}/#key=${KEY}`);
  console.log(`setup URL: ${teams.setupURL}`);
});
