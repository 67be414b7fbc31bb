// How accounts, keys, shares, usage and audit events read on the page
// (DOM-free, unit-tested in e2e/unit). Every function here returns text for
// people: never "null", "undefined", "NaN" or "[object Object]", whatever
// the server sent.

/** The audit kinds the server keeps (datachat.AuditKinds), offered in the filter. */
export const AUDIT_KINDS = [
  'sign_in',
  'key.created', 'key.revoked',
  'user.invited', 'user.disabled', 'user.reset', 'user.removed', 'user.changed',
  'source.added', 'source.changed', 'source.granted', 'source.removed', 'source.query',
  'share.created', 'share.revoked',
  'audit.pruned',
];

export const AUDIT_OUTCOMES = ['ok', 'refused', 'failed'];

/** The filters of GET /api/admin/audit that the page sets. */
export const AUDIT_FILTERS = ['user', 'source', 'kind', 'outcome', 'since', 'until'];

const pad = (n) => String(n).padStart(2, '0');

function parseTime(v) {
  if (v === null || v === undefined || v === '') return null;
  const t = typeof v === 'number' ? v : Date.parse(String(v));
  return Number.isFinite(t) ? t : null;
}

/** formatWhen is a time as "2026-03-01 14:05" in the browser's zone ('' when absent or unreadable). */
export function formatWhen(v, { seconds = false } = {}) {
  const t = parseTime(v);
  if (t === null) return '';
  const d = new Date(t);
  const s = `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}`;
  return seconds ? `${s}:${pad(d.getSeconds())}` : s;
}

/** formatDay is a UTC day (usage days are midnight UTC) as "2026-03-01". */
export function formatDay(v) {
  const t = parseTime(v);
  if (t === null) return '';
  const d = new Date(t);
  return `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())}`;
}

/** relTime is how long ago a time was: "just now", "5 min ago", "3 h ago", "2 d ago", else the date. */
export function relTime(v, now = Date.now()) {
  const t = parseTime(v);
  if (t === null) return '';
  const s = (now - t) / 1000;
  if (s < 60) return 'just now';
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  if (s < 7 * 86400) return `${Math.floor(s / 86400)} d ago`;
  return formatWhen(t).slice(0, 10);
}

/** count formats a number with thousands separators ('' for what is not a number). */
export function count(n) {
  const x = Number(n);
  return n !== null && n !== undefined && n !== '' && Number.isFinite(x) ? x.toLocaleString('en-US') : '';
}

/** text is a server-given value as text: '' for what has none (absent, an object, NaN). */
const text = (v) => {
  if (v === null || v === undefined || typeof v === 'object' || typeof v === 'function') return '';
  if (typeof v === 'number' && !Number.isFinite(v)) return '';
  return String(v);
};

/**
 * accountStatus says where an account stands: disabled, signing in by SSO,
 * with a password, or not yet (an invite not used: a key still works).
 * @returns {{label: string, kind: 'disabled'|'active'|'pending'}}
 */
export function accountStatus(a) {
  if (!a) return { label: '', kind: 'pending' };
  if (a.disabled_at) return { label: `Disabled ${formatWhen(a.disabled_at).slice(0, 10)}`.trim(), kind: 'disabled' };
  if (a.sso) return { label: 'Signs in with SSO', kind: 'active' };
  if (a.has_password) return { label: 'Active', kind: 'active' };
  return { label: 'No password yet (invite not used)', kind: 'pending' };
}

/** roleLabel names a role for people. */
export function roleLabel(role) {
  return role === 'admin' ? 'Admin' : role === 'member' ? 'Member' : text(role);
}

/** authLabel says how the signed-in user signed in (GET /api/me's auth). */
export function authLabel(auth) {
  return { password: 'password', oidc: 'single sign-on', api_key: 'API key' }[auth] || text(auth);
}

/** budgetText is a user's own daily token budget (absent: the server's). */
export function budgetText(tokens) {
  if (tokens === null || tokens === undefined) return 'Server default';
  const n = Number(tokens);
  if (!Number.isFinite(n)) return 'Server default';
  if (n === 0) return 'No limit';
  return `${count(n)} tokens a day`;
}

/**
 * parseBudget reads the budget field: empty is the server's default (null),
 * 0 no limit, else a whole number of tokens (separators allowed).
 * @returns {{value: number|null} | {error: string}}
 */
export function parseBudget(input) {
  const s = String(input ?? '').trim().replace(/[\s,_']/g, '');
  if (!s) return { value: null };
  if (!/^\d+$/.test(s)) return { error: 'A token budget is a whole number of tokens a day (0: no limit; empty: the server’s default).' };
  const n = Number(s);
  if (!Number.isSafeInteger(n)) return { error: 'That budget is too large.' };
  return { value: n };
}

/** parseNames splits "bob, carol dave" into unique names, in order. */
export function parseNames(input) {
  const out = [];
  for (const n of String(input ?? '').split(/[\s,;]+/)) {
    if (n && !out.includes(n)) out.push(n);
  }
  return out;
}

/** shareLabel is whom a share is with. */
export function shareLabel(share) {
  if (!share) return '';
  if (share.everyone) return 'Everyone signed in to this server';
  return text(share.user) || 'A user';
}

const NOT_COPIED_KINDS = { source: 'Database', dataset: 'Dataset', document: 'Document' };

/** notCopiedText is one line of what a copy left out: "Database warehouse: not granted to you." */
export function notCopiedText(item) {
  if (!item) return '';
  const kind = NOT_COPIED_KINDS[item.kind] || text(item.kind) || 'Item';
  const name = text(item.name);
  const reason = text(item.reason);
  return `${kind}${name ? ` ${name}` : ''}${reason ? `: ${reason}` : ''}`;
}

/** keyLabel is how a key is told apart: its prefix. */
export function keyLabel(k) {
  const p = text(k && k.prefix);
  return p ? `${p}…` : 'key';
}

/**
 * auditQuery builds GET /api/admin/audit's query string from the filters
 * (empty ones left out), a cursor and a page size.
 */
export function auditQuery(filters = {}, cursor = '', limit = 0) {
  const q = new URLSearchParams();
  for (const k of AUDIT_FILTERS) {
    const v = String(filters[k] ?? '').trim();
    if (v) q.set(k, v);
  }
  if (cursor) q.set('cursor', cursor);
  if (limit) q.set('limit', String(limit));
  const s = q.toString();
  return s ? `?${s}` : '';
}

/**
 * auditFacts lists what an audit event says beyond its time, kind, outcome
 * and actor, as [label, value] pairs (only those present).
 */
export function auditFacts(ev) {
  if (!ev) return [];
  const facts = [];
  const add = (label, v) => {
    const t = text(v);
    if (t) facts.push([label, t]);
  };
  add('Source', ev.source);
  if (ev.target && ev.target !== ev.source) add('Target', ev.target);
  add('Conversation', ev.conversation_id);
  if (ev.sql) add('SQL', ev.sql_truncated ? `${ev.sql} … (cut)` : ev.sql);
  if (ev.row_count !== null && ev.row_count !== undefined && count(ev.row_count)) {
    add('Rows', `${count(ev.row_count)} row${Number(ev.row_count) === 1 ? '' : 's'}`);
  }
  const ms = Number(ev.duration_ms);
  if (ev.duration_ms !== undefined && ev.duration_ms !== null && Number.isFinite(ms) && ms > 0) add('Took', ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(2)} s`);
  add('Error', ev.error);
  add('Detail', ev.detail);
  add('Address', ev.address);
  add('Request', ev.request_id);
  return facts;
}

/** actorText is who acted in an audit event ("the command line" when no user). */
export function actorText(ev) {
  return text(ev && ev.user) || 'the server or its command line';
}

/**
 * usageSummary arranges GET /api/admin/usage's days: the rows newest day
 * first then by user (as the server sends them, sorted again to be sure),
 * each day's total (for the chart) oldest first, and each user's total.
 */
export function usageSummary(usage) {
  const rows = (Array.isArray(usage) ? usage : []).filter((u) => u && typeof u === 'object').map((u) => {
    const input = Number(u.input_tokens) || 0;
    const output = Number(u.output_tokens) || 0;
    return { day: formatDay(u.day), user: text(u.user) || text(u.user_id), turns: Number(u.turns) || 0, input, output, total: input + output };
  }).filter((r) => r.day);
  rows.sort((a, b) => (a.day === b.day ? a.user.localeCompare(b.user) : b.day.localeCompare(a.day)));
  const days = new Map();
  const users = new Map();
  for (const r of rows) {
    days.set(r.day, (days.get(r.day) || 0) + r.total);
    const u = users.get(r.user) || { user: r.user, turns: 0, total: 0 };
    u.turns += r.turns;
    u.total += r.total;
    users.set(r.user, u);
  }
  const perDay = [...days.entries()].map(([day, total]) => ({ day, total })).sort((a, b) => a.day.localeCompare(b.day));
  const max = perDay.reduce((m, d) => Math.max(m, d.total), 0);
  return { rows, perDay, max, perUser: [...users.values()].sort((a, b) => b.total - a.total || a.user.localeCompare(b.user)) };
}

/** BAD_TEXT finds what a page must never show: a value printed instead of its text. */
export const BAD_TEXT = /\bnull\b|\bundefined\b|\[object Object\]|\bNaN\b|Invalid Date/;
