// The accounts, sessions, roles, sharing and audit parts of mock-server.mjs,
// after TEAMS-API.md (issue 23): enough of the server's behaviour for the
// page and run.mjs to be worked on without the Go server. Not the product:
// passwords are compared as given, nothing is persisted.

import crypto from 'node:crypto';

const rid = (p) => `${p}_${crypto.randomBytes(6).toString('hex')}`;
const token = () => crypto.randomBytes(32).toString('base64url');
const now = () => new Date().toISOString();

export const SIGNED_OUT = 'You were signed out. Sign in again.';
export const DISABLED = 'Your account was disabled. Ask an administrator.';
const FORBIDDEN = 'Only an administrator may do this.';

export class Teams {
  constructor({ key, base }) {
    this.base = base; // the server's origin, for invite links
    this.users = new Map(); // name → account
    this.keys = new Map(); // secret → {id, prefix, user, created_at, last_used_at}
    this.sessions = new Map(); // token → {id, user, method}
    this.invites = new Map(); // token → {user, expires_at}
    this.audit = []; // oldest first
    this.shares = []; // {id, conv, user, everyone, created_at}
    this.sockets = new Set(); // {ws, user, cred}
    this.usage = []; // {user, day, turns, input, output}
    this.sources = [{ name: 'warehouse', kind: 'postgres', tables: ['penguins'], users: ['browser'], all_users: false, origin: 'cli' }];
    this.addUser('admin', 'admin');
    this.addUser('browser', 'member');
    this.keys.set(key, { id: rid('key'), prefix: key.slice(0, 6), user: 'browser', created_at: now(), last_used_at: null });
    this.setupURL = this.invite('admin').url;
  }

  addUser(name, role) {
    const a = { id: rid('usr'), name, role, created_at: now(), has_password: false, sso: false, password: null };
    this.users.set(name, a);
    return a;
  }

  /** account is the JSON of an account (no password). */
  account(a) {
    const { password, ...out } = a;
    return out;
  }

  me(who) {
    return { id: who.user.id, name: who.user.name, role: who.user.role, auth: who.auth };
  }

  invite(name) {
    for (const [t, inv] of this.invites) if (inv.user === name) this.invites.delete(t);
    const t = token();
    const expires = new Date(Date.now() + 7 * 86400e3).toISOString();
    this.invites.set(t, { user: name, expires_at: expires });
    return { url: `${this.base()}/#invite=${t}`, expires_at: expires };
  }

  record(ev, who, addr) {
    this.audit.push({ id: rid('aud'), time: now(), outcome: 'ok', user_id: who ? who.user.id : undefined, user: who ? who.user.name : undefined, address: addr, ...ev });
  }

  /** who authenticates a request: {user, cred, auth} | {error} | null (no credential). */
  who(req, url) {
    const sub = (req.headers['sec-websocket-protocol'] || '').split(',').map((p) => p.trim()).find((p) => p.startsWith('datachat.key.'));
    const key = req.headers['x-api-key'] || (req.headers.authorization || '').replace(/^Bearer /, '') || (sub && sub.slice('datachat.key.'.length)) || url.searchParams.get('api_key');
    if (key) {
      const k = this.keys.get(key);
      if (!k) return { error: 'Missing or invalid API key.' };
      const u = this.users.get(k.user);
      if (!u) return { error: 'Missing or invalid API key.' };
      if (u.disabled_at) return { error: DISABLED };
      k.last_used_at = now();
      u.last_seen_at = now();
      return { user: u, cred: { kind: 'key', id: k.id }, auth: 'api_key' };
    }
    const tok = cookie(req, 'datachat_session');
    if (!tok) return null;
    const s = this.sessions.get(tok);
    if (!s) return { error: SIGNED_OUT };
    const u = this.users.get(s.user);
    if (!u) return { error: SIGNED_OUT };
    if (u.disabled_at) return { error: DISABLED };
    u.last_seen_at = now();
    return { user: u, cred: { kind: 'session', id: s.id, token: tok }, auth: s.method, cookie: true };
  }

  /** cut closes the sockets of pred's credentials with 4401 and the reason. */
  cut(pred, reason) {
    for (const s of [...this.sockets]) {
      if (pred(s)) {
        this.sockets.delete(s);
        s.ws.close(4401, reason);
      }
    }
  }

  signIn(res, user, method, send) {
    const t = token();
    const s = { id: rid('ses'), user: user.name, method };
    this.sessions.set(t, s);
    send(res, 200, { user: { id: user.id, name: user.name, role: user.role, auth: method } }, { 'Set-Cookie': `datachat_session=${t}; Path=/; HttpOnly; SameSite=Lax` });
  }

  endSessionsOf(name, reason) {
    for (const [t, s] of this.sessions) if (s.user === name) this.sessions.delete(t);
    this.cut((s) => s.user.name === name && s.cred.kind === 'session', reason);
  }

  /**
   * route answers the teams routes; false when p is not one of them. ctx:
   * {req, res, url, p, body (async), send, fail, who, conversations, detail, copy}.
   */
  async route(ctx) {
    const { req, res, p, send, fail } = ctx;
    const m = req.method;
    const addr = req.socket.remoteAddress;
    const json = async () => {
      const b = await ctx.body();
      try {
        return b.length ? JSON.parse(b) : {};
      } catch {
        return null;
      }
    };
    const noContent = (extra = {}) => {
      res.writeHead(204, extra);
      res.end();
    };
    if (p === '/api/auth/methods' && m === 'GET') return send(res, 200, { password: true, oidc: false }), true;
    if (p === '/api/auth/login' && m === 'POST') {
      const j = await json();
      const u = j && this.users.get(String(j.user || ''));
      if (!u || !u.password || u.password !== j.password) {
        this.record({ kind: 'sign_in', outcome: 'refused', target: String((j && j.user) || ''), detail: 'password: wrong user name or password' }, null, addr);
        return fail(res, 401, 'unauthorized', 'Wrong user name or password.'), true;
      }
      if (u.disabled_at) return fail(res, 401, 'unauthorized', DISABLED), true;
      this.record({ kind: 'sign_in', detail: 'password' }, { user: u }, addr);
      return this.signIn(res, u, 'password', send), true;
    }
    if (p === '/api/auth/invite' && m === 'POST') {
      const j = await json();
      const pw = String((j && j.password) || '');
      if ([...pw].length < 12) return fail(res, 400, 'invalid_request', 'A password needs at least 12 characters.'), true;
      const inv = j && this.invites.get(String(j.token || ''));
      const u = inv && this.users.get(inv.user);
      if (!inv || !u || u.disabled_at || Date.parse(inv.expires_at) < Date.now()) {
        return fail(res, 401, 'unauthorized', 'This invite link is invalid, used or expired. Ask an administrator for a new one.'), true;
      }
      this.invites.delete(j.token);
      u.password = pw;
      u.has_password = true;
      this.endSessionsOf(u.name, SIGNED_OUT);
      this.record({ kind: 'sign_in', detail: 'invite' }, { user: u }, addr);
      return this.signIn(res, u, 'password', send), true;
    }
    if (p === '/api/auth/logout' && m === 'POST') {
      const tok = cookie(req, 'datachat_session');
      const s = tok && this.sessions.get(tok);
      if (s) {
        this.sessions.delete(tok);
        this.cut((x) => x.cred.kind === 'session' && x.cred.id === s.id, SIGNED_OUT);
      }
      return noContent({ 'Set-Cookie': 'datachat_session=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0' }), true;
    }
    if (!p.startsWith('/api/me') && !p.startsWith('/api/keys') && !p.startsWith('/api/admin/') && !p.startsWith('/api/shared') && !/^\/api\/conversations\/[^/]+\/shares/.test(p)) return false;
    const who = ctx.who;
    if (p === '/api/me' && m === 'GET') return send(res, 200, this.me(who)), true;

    if (p === '/api/keys' && m === 'GET') {
      return send(res, 200, { keys: [...this.keys.values()].filter((k) => k.user === who.user.name).map((k) => ({ ...k, user_id: who.user.id })) }), true;
    }
    if (p === '/api/keys' && m === 'POST') {
      const secret = `dc_${token()}`;
      const k = { id: rid('key'), prefix: secret.slice(0, 8), user: who.user.name, created_at: now(), last_used_at: null };
      this.keys.set(secret, k);
      this.record({ kind: 'key.created', target: k.id }, who, addr);
      return send(res, 201, { key: secret, id: k.id, prefix: k.prefix, created_at: k.created_at }), true;
    }
    let r = /^\/api\/keys\/([^/]+)$/.exec(p);
    if (r && m === 'DELETE') {
      const e = [...this.keys.entries()].find(([, k]) => k.id === r[1] && k.user === who.user.name);
      if (!e) return fail(res, 404, 'not_found', 'No such key.'), true;
      this.keys.delete(e[0]);
      this.cut((s) => s.cred.kind === 'key' && s.cred.id === e[1].id, 'Your API key was revoked. Sign in again.');
      this.record({ kind: 'key.revoked', target: e[1].id }, who, addr);
      return noContent(), true;
    }

    // ---------- sharing ----------
    r = /^\/api\/conversations\/([^/]+)\/shares(?:\/([^/]+))?$/.exec(p);
    if (r) {
      const c = ctx.conversations.get(r[1]);
      if (!c || c.owner !== who.user.name) return fail(res, 404, 'not_found', 'Conversation not found.'), true;
      const pub = (s) => ({ id: s.id, user: s.user || undefined, everyone: s.everyone, created_at: s.created_at });
      if (!r[2] && m === 'GET') return send(res, 200, { shares: this.shares.filter((s) => s.conv === c.id).map(pub) }), true;
      if (!r[2] && m === 'POST') {
        const j = await json();
        if (!j || (!j.everyone && !(Array.isArray(j.users) && j.users.length))) return fail(res, 400, 'invalid_request', 'Send {"users": ["name", …]} or {"everyone": true}.'), true;
        const unknown = (j.users || []).filter((n) => !this.users.has(n));
        if (unknown.length) return fail(res, 400, 'invalid_request', `No user is named ${unknown.join(', ')}.`), true;
        const out = [];
        const add = (user, everyone) => {
          let s = this.shares.find((x) => x.conv === c.id && (everyone ? x.everyone : x.user === user));
          if (!s) {
            s = { id: rid('shr'), conv: c.id, user: everyone ? null : user, everyone, created_at: now() };
            this.shares.push(s);
            this.record({ kind: 'share.created', target: s.id, conversation_id: c.id, detail: everyone ? 'everyone' : `with ${user}` }, who, addr);
          }
          out.push(pub(s));
        };
        if (j.everyone) add(null, true);
        for (const n of j.users || []) add(n, false);
        return send(res, 201, { shares: out }), true;
      }
      if (r[2] && m === 'DELETE') {
        const i = this.shares.findIndex((s) => s.conv === c.id && s.id === r[2]);
        if (i < 0) return fail(res, 404, 'not_found', 'No such share.'), true;
        this.record({ kind: 'share.revoked', target: this.shares[i].id, conversation_id: c.id }, who, addr);
        this.shares.splice(i, 1);
        return noContent(), true;
      }
    }
    const visible = (c) => c && c.owner !== who.user.name && !(this.users.get(c.owner) || {}).disabled_at &&
      this.shares.some((s) => s.conv === c.id && (s.everyone || s.user === who.user.name));
    if (p === '/api/shared' && m === 'GET') {
      const list = [...ctx.conversations.values()].filter(visible).map((c) => ({
        id: c.id, title: c.title, owner: c.owner, updated_at: c.updated_at,
        shared_at: this.shares.filter((s) => s.conv === c.id).map((s) => s.created_at).sort()[0],
      }));
      return send(res, 200, { conversations: list }), true;
    }
    r = /^\/api\/shared\/([^/]+)(\/copy)?$/.exec(p);
    if (r) {
      const c = ctx.conversations.get(r[1]);
      if (!visible(c)) return fail(res, 404, 'not_found', 'Conversation not found.'), true;
      if (!r[2] && m === 'GET') return send(res, 200, { ...ctx.detail(c), pending_confirmation: null, owner: c.owner, read_only: true }), true;
      if (r[2] && m === 'POST') {
        const granted = (name) => this.sources.some((s) => s.name === name && (s.all_users || s.users.includes(who.user.name)));
        const { conversation, sources } = ctx.copy(c, who.user.name);
        const notCopied = sources.filter((n) => !granted(n)).map((n) => ({ kind: 'source', name: n, reason: 'not granted to you' }));
        return send(res, 201, { conversation, not_copied: notCopied }), true;
      }
    }

    // ---------- admin ----------
    if (!p.startsWith('/api/admin/')) return fail(res, 404, 'not_found', 'Not found.'), true;
    if (who.user.role !== 'admin') return fail(res, 403, 'forbidden', FORBIDDEN), true;
    const q = p.slice('/api/admin/'.length);
    if (q === 'users' && m === 'GET') return send(res, 200, { users: [...this.users.values()].sort((a, b) => a.name.localeCompare(b.name)).map((a) => this.account(a)) }), true;
    if (q === 'users' && m === 'POST') {
      const j = await json();
      const name = String((j && j.name) || '').trim();
      if (!name) return fail(res, 400, 'invalid_request', 'A user needs a name.'), true;
      if (this.users.has(name)) return fail(res, 409, 'conflict', `A user named ${name} exists already.`), true;
      const u = this.addUser(name, j.role === 'admin' ? 'admin' : 'member');
      const inv = this.invite(name);
      this.record({ kind: 'user.invited', target: name }, who, addr);
      return send(res, 201, { user: this.account(u), invite_url: inv.url, expires_at: inv.expires_at }), true;
    }
    r = /^users\/([^/]+)(?:\/(reset|disable|enable))?$/.exec(q);
    if (r) {
      const name = decodeURIComponent(r[1]);
      const u = this.users.get(name);
      if (!u) return fail(res, 404, 'not_found', `No user is named ${name}.`), true;
      const lastAdmin = () => u.role === 'admin' && [...this.users.values()].filter((x) => x.role === 'admin' && !x.disabled_at).length <= 1;
      if (r[2] === 'reset' && m === 'POST') {
        const inv = this.invite(name);
        this.record({ kind: 'user.reset', target: name }, who, addr);
        return send(res, 200, { invite_url: inv.url, expires_at: inv.expires_at }), true;
      }
      if (r[2] === 'disable' && m === 'POST') {
        if (lastAdmin()) return fail(res, 409, 'conflict', 'The last administrator cannot be disabled.'), true;
        u.disabled_at = now();
        for (const [t, s] of this.sessions) if (s.user === name) this.sessions.delete(t);
        this.cut((s) => s.user.name === name, DISABLED);
        this.record({ kind: 'user.disabled', target: name }, who, addr);
        return send(res, 200, { user: this.account(u) }), true;
      }
      if (r[2] === 'enable' && m === 'POST') {
        delete u.disabled_at;
        this.record({ kind: 'user.changed', target: name, detail: 'enabled' }, who, addr);
        return send(res, 200, { user: this.account(u) }), true;
      }
      if (!r[2] && m === 'PATCH') {
        const j = await json();
        if (!j) return fail(res, 400, 'invalid_request', 'The body is not JSON.'), true;
        if (j.role !== undefined) {
          if (j.role !== 'admin' && j.role !== 'member') return fail(res, 400, 'invalid_request', 'role is admin or member.'), true;
          if (j.role === 'member' && lastAdmin()) return fail(res, 409, 'conflict', 'The last administrator cannot become a member.'), true;
          u.role = j.role;
        }
        if (j.tokens_per_day !== undefined) {
          if (j.tokens_per_day === null) delete u.tokens_per_day;
          else if (!Number.isInteger(j.tokens_per_day) || j.tokens_per_day < 0) return fail(res, 400, 'invalid_request', 'tokens_per_day is a whole number, 0 or more, or null.'), true;
          else u.tokens_per_day = j.tokens_per_day;
        }
        return send(res, 200, { user: this.account(u) }), true;
      }
      if (!r[2] && m === 'DELETE') {
        if (lastAdmin()) return fail(res, 409, 'conflict', 'The last administrator cannot be removed.'), true;
        this.users.delete(name);
        this.cut((s) => s.user.name === name, SIGNED_OUT);
        for (const [k, v] of [...ctx.conversations]) if (v.owner === name) ctx.conversations.delete(k);
        this.record({ kind: 'user.removed', target: name }, who, addr);
        return noContent(), true;
      }
    }
    if (q === 'keys' && m === 'GET') {
      return send(res, 200, { keys: [...this.keys.values()].map((k) => ({ ...k, user_id: (this.users.get(k.user) || {}).id })) }), true;
    }
    r = /^keys\/([^/]+)$/.exec(q);
    if (r && m === 'DELETE') {
      const e = [...this.keys.entries()].find(([, k]) => k.id === r[1]);
      if (!e) return fail(res, 404, 'not_found', 'No such key.'), true;
      this.keys.delete(e[0]);
      this.cut((s) => s.cred.kind === 'key' && s.cred.id === e[1].id, 'Your API key was revoked. Sign in again.');
      this.record({ kind: 'key.revoked', target: e[1].id }, who, addr);
      return noContent(), true;
    }
    if (q === 'sources' && m === 'GET') return send(res, 200, { sources: this.sources }), true;
    r = /^sources\/([^/]+)\/grants$/.exec(q);
    if (r && m === 'PUT') {
      const s = this.sources.find((x) => x.name === decodeURIComponent(r[1]));
      if (!s) return fail(res, 404, 'not_found', 'No such source.'), true;
      const j = await json();
      if (j && j.all_users && (j.users || []).length) return fail(res, 400, 'invalid_request', 'Give named "users" or "all_users": true, not both.'), true;
      const unknown = ((j && j.users) || []).filter((n) => !this.users.has(n));
      if (unknown.length) return fail(res, 400, 'invalid_request', `No user is named ${unknown.join(', ')}.`), true;
      const from = s.all_users ? 'all users' : s.users.join(', ');
      s.users = [...new Set(j.users || [])].sort();
      s.all_users = !!j.all_users;
      this.record({ kind: 'source.granted', source: s.name, target: s.name, detail: `from ${from || 'nobody'} to ${s.all_users ? 'all users' : s.users.join(', ') || 'nobody'}` }, who, addr);
      return send(res, 200, s), true;
    }
    if (q.startsWith('usage') && m === 'GET') {
      return send(res, 200, { usage: this.usage.map((u) => ({ user_id: (this.users.get(u.user) || {}).id, user: u.user, day: u.day, turns: u.turns, input_tokens: u.input, output_tokens: u.output })) }), true;
    }
    if (q.startsWith('audit') && m === 'GET') {
      const f = ctx.url.searchParams;
      const since = ago(f.get('since'));
      const until = ago(f.get('until'));
      const list = [...this.audit].reverse().filter((e) => (!f.get('user') || e.user === f.get('user')) &&
        (!f.get('source') || e.source === f.get('source')) && (!f.get('kind') || e.kind === f.get('kind')) &&
        (!f.get('outcome') || e.outcome === f.get('outcome')) && (!since || Date.parse(e.time) >= since) && (!until || Date.parse(e.time) < until));
      const from = Number(f.get('cursor') || 0);
      const limit = Math.min(1000, Number(f.get('limit') || 100));
      const page = list.slice(from, from + limit);
      return send(res, 200, { events: page, next_cursor: from + limit < list.length ? String(from + limit) : undefined }), true;
    }
    return fail(res, 404, 'not_found', 'Not found.'), true;
  }

  /** turnUsed adds a finished answer's tokens to its user's day. */
  turnUsed(user, input, output) {
    const day = `${now().slice(0, 10)}T00:00:00Z`;
    let u = this.usage.find((x) => x.user === user && x.day === day);
    if (!u) this.usage.push((u = { user, day, turns: 0, input: 0, output: 0 }));
    u.turns++;
    u.input += input;
    u.output += output;
  }
}

function cookie(req, name) {
  for (const part of String(req.headers.cookie || '').split(';')) {
    const [k, ...v] = part.trim().split('=');
    if (k === name) return v.join('=');
  }
  return '';
}

/** ago reads the audit filter's times: a date, a time, or how long ago (36h, 7d). */
function ago(v) {
  if (!v) return 0;
  const m = /^(\d+)([hd])$/.exec(v);
  if (m) return Date.now() - Number(m[1]) * (m[2] === 'h' ? 3600e3 : 86400e3);
  const t = Date.parse(v);
  return Number.isFinite(t) ? t : 0;
}
