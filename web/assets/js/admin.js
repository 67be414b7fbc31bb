// The admin page (admins only; the server refuses members every route here
// with 403): users — invite (the link shown to copy), role, token budget,
// disable/enable, reset, remove —, database sources and whom they are
// granted to, token usage per user and day, and the audit log with its
// filters and pages. Every list is a column of cards, so a phone shows it
// as a wide screen does.

import { h, icon, clear, append } from './dom.js';
import { listOf } from './api.js';
import { kindLabel } from './sources.js';
import { copyText } from './account.js';
import {
  accountStatus, roleLabel, budgetText, parseBudget, formatWhen, relTime, count,
  usageSummary, auditQuery, auditFacts, actorText, AUDIT_KINDS, AUDIT_OUTCOMES, parseNames,
} from './teams.js';

const $ = (id) => document.getElementById(id);
export const ADMIN_TABS = ['users', 'sources', 'keys', 'usage', 'audit'];
const ADM = '/api/admin';
const userPath = (name) => `${ADM}/users/${encodeURIComponent(name)}`;
const ORIGINS = { cli: 'added with datachat sources add', config: 'from serve’s config file' };

/** status is a line saying how an action went (kind: ok, error, busy or ''). */
function status(el, text, kind = '') {
  clear(el);
  el.className = `panel-status ${kind}`;
  if (text) append(el, [kind === 'error' ? icon('alert', 15) : null, h('span', null, text)]);
}

export class AdminPage {
  /**
   * @param {object} o
   * @param {() => import('./api.js').Api} o.api
   * @param {() => object} o.me the signed-in admin (GET /api/me)
   * @param {(tab: string) => void} o.onTab a tab was chosen (the page keeps it in the address)
   * @param {() => void} [o.onSelfChanged] the admin changed their own account (their role)
   */
  constructor({ api, me, onTab, onSelfChanged }) {
    this.getApi = api;
    this.me = me;
    this.onTab = onTab;
    this.onSelfChanged = onSelfChanged || (() => {});
    this.tab = 'users';
    this.users = [];
    this.audit = { filters: {}, cursors: [''], page: 0, limit: 50 };
    for (const b of document.querySelectorAll('.admin-tab')) {
      b.addEventListener('click', () => this.show(b.dataset.tab));
      b.addEventListener('keydown', (e) => {
        if (e.key !== 'ArrowRight' && e.key !== 'ArrowLeft') return;
        const i = ADMIN_TABS.indexOf(this.tab) + (e.key === 'ArrowRight' ? 1 : -1);
        const next = ADMIN_TABS[(i + ADMIN_TABS.length) % ADMIN_TABS.length];
        this.show(next);
        document.querySelector(`.admin-tab[data-tab="${next}"]`).focus();
      });
    }
    this.buildUsers();
    this.buildSources();
    this.buildKeys();
    this.buildUsage();
    this.buildAudit();
  }

  get api() {
    return this.getApi();
  }

  /** show opens a tab and loads what it shows. */
  show(tab) {
    if (!ADMIN_TABS.includes(tab)) tab = 'users';
    this.tab = tab;
    for (const b of document.querySelectorAll('.admin-tab')) {
      const on = b.dataset.tab === tab;
      b.setAttribute('aria-selected', String(on));
      b.tabIndex = on ? 0 : -1;
    }
    for (const t of ADMIN_TABS) $(`admin-${t}`).hidden = t !== tab;
    const me = this.me();
    $('admin-who').textContent = me && me.name ? `Signed in as ${me.name}` : '';
    this.onTab(tab);
    if (tab === 'users') this.loadUsers();
    else if (tab === 'sources') this.loadSources();
    else if (tab === 'keys') this.loadKeys();
    else if (tab === 'usage') this.loadUsage();
    else this.loadAudit();
  }

  // ---------- users ----------

  buildUsers() {
    const sec = $('admin-users');
    this.inviteName = h('input', { id: 'invite-name', testid: 'invite-name', type: 'text', spellcheck: 'false', autocapitalize: 'off', placeholder: 'Name, e.g. mia', 'aria-label': 'Name of the new user' });
    this.inviteRole = h('select', { testid: 'invite-role', 'aria-label': 'Role of the new user' },
      h('option', { value: 'member' }, 'Member'), h('option', { value: 'admin' }, 'Admin'));
    this.inviteStatus = h('p.panel-status', { testid: 'invite-status', role: 'status' });
    this.linkBox = h('div.secret-box', { testid: 'invite-url-box', hidden: true });
    const form = h('form.inline-form.invite-form', { testid: 'invite-user-form' },
      this.inviteName, this.inviteRole,
      h('button.btn.primary.small', { type: 'submit', testid: 'invite-submit-user' }, icon('plus', 15), 'Invite'));
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      this.invite();
    });
    this.userList = h('ul.admin-list', { testid: 'user-list' });
    this.usersStatus = h('p.panel-status', { role: 'status' });
    sec.append(
      h('div.admin-card', null,
        h('h2', null, 'Invite someone'),
        h('p.muted.small-text', null, 'They get a link to set their password, valid for 7 days and usable once. Send it to them yourself.'),
        form, this.inviteStatus, this.linkBox),
      h('div.admin-head', null, h('h2', null, 'Users'), h('span.spacer'),
        h('button.btn.ghost.small', { type: 'button', onclick: () => this.loadUsers() }, 'Refresh')),
      this.usersStatus,
      this.userList);
  }

  /** showLink shows an invite or reset link to copy. */
  showLink(name, url, expires, what) {
    clear(this.linkBox);
    const field = h('input', { type: 'text', readonly: true, testid: 'invite-url', value: url, 'aria-label': `Invite link for ${name}`, spellcheck: 'false' });
    field.value = url;
    const until = formatWhen(expires);
    this.linkBox.append(
      h('div.secret-head', null, `${what} for ${name}: send this link to them. It works once${until ? `, until ${until}` : ''}.`),
      h('div.copy-row', null, field,
        h('button.btn.small', { type: 'button', testid: 'invite-url-copy', onclick: (e) => copyText(url, e.currentTarget, field) }, icon('copy', 14), 'Copy')));
    this.linkBox.hidden = false;
    this.linkBox.dataset.user = name;
    field.select();
  }

  async invite() {
    const name = this.inviteName.value.trim();
    if (!name) {
      status(this.inviteStatus, 'Enter the new user’s name.', 'error');
      this.inviteName.focus();
      return;
    }
    status(this.inviteStatus, 'Inviting…', 'busy');
    try {
      const res = await this.api.post(`${ADM}/users`, { name, role: this.inviteRole.value });
      status(this.inviteStatus, '');
      this.inviteName.value = '';
      this.showLink(res.user && res.user.name ? res.user.name : name, String(res.invite_url || ''), res.expires_at, 'Invite');
      await this.loadUsers();
    } catch (err) {
      status(this.inviteStatus, err.message, 'error');
    }
  }

  async loadUsers() {
    try {
      this.users = listOf(await this.api.get(`${ADM}/users`), 'users');
      status(this.usersStatus, '');
    } catch (err) {
      status(this.usersStatus, err.message, 'error');
    }
    this.renderUsers();
  }

  renderUsers() {
    clear(this.userList);
    if (!this.users.length) this.userList.append(h('li.empty-item', null, 'No users yet.'));
    const me = this.me();
    for (const a of this.users) this.userList.append(this.userRow(a, me && me.id === a.id));
  }

  userRow(a, self) {
    const st = accountStatus(a);
    const li = h('li.admin-item.user-row', { testid: 'user-row', dataset: { name: a.name, status: st.kind, role: String(a.role || '') } });
    const msg = h('p.panel-status', { testid: 'user-status', role: 'status' });
    const act = async (what, fn) => {
      status(msg, `${what}…`, 'busy');
      try {
        await fn();
        await this.loadUsers();
      } catch (err) {
        status(msg, err.message, 'error');
      }
    };
    const role = h('select', { testid: 'user-role', 'aria-label': `Role of ${a.name}` },
      ['member', 'admin'].map((r) => h('option', { value: r, selected: a.role === r }, roleLabel(r))));
    role.value = a.role === 'admin' ? 'admin' : 'member';
    role.addEventListener('change', () => act('Changing the role', async () => {
      try {
        await this.api.patch(userPath(a.name), { role: role.value });
      } catch (err) {
        role.value = a.role; // refused (e.g. the last admin): show what holds
        throw err;
      }
      if (self) this.onSelfChanged();
    }));
    const budget = h('input.budget-input', { testid: 'user-budget', type: 'text', inputmode: 'numeric', placeholder: 'Server default', 'aria-label': `Daily token budget of ${a.name}` });
    budget.value = a.tokens_per_day === null || a.tokens_per_day === undefined ? '' : String(a.tokens_per_day);
    const saveBudget = () => {
      const b = parseBudget(budget.value);
      if (b.error) {
        status(msg, b.error, 'error');
        budget.focus();
        return;
      }
      act('Saving the budget', () => this.api.patch(userPath(a.name), { tokens_per_day: b.value }));
    };
    budget.addEventListener('keydown', (e) => {
      if (e.key === 'Enter') {
        e.preventDefault();
        saveBudget();
      }
    });
    const disabled = !!a.disabled_at;
    const actions = h('div.row-actions', null,
      disabled
        ? h('button.btn.small', { type: 'button', testid: 'user-enable', onclick: () => act('Enabling', () => this.api.post(`${userPath(a.name)}/enable`)) }, 'Enable')
        : h('button.btn.small', { type: 'button', testid: 'user-disable', disabled: self, title: self ? 'You cannot disable yourself' : 'Signs them out everywhere at once; their keys stop working', onclick: () => act('Disabling', () => this.api.post(`${userPath(a.name)}/disable`)) }, 'Disable'),
      h('button.btn.small', { type: 'button', testid: 'user-reset', title: 'A new link to set a password; the old password keeps working until it is used', onclick: () => this.reset(a, msg) }, 'Reset password'),
      h('button.btn.small.danger', { type: 'button', testid: 'user-remove', disabled: self, onclick: () => this.confirmRemove(a, li, msg) }, 'Remove'));
    const last = a.last_seen_at ? `seen ${relTime(a.last_seen_at)}` : 'never seen';
    li.append(
      h('div.user-head', null,
        h('span.user-avatar', { 'aria-hidden': 'true' }, [...String(a.name || '?')][0].toUpperCase()),
        h('div.item-main', null,
          h('div.user-row-name', null, String(a.name || ''), self ? h('span.you', null, ' (you)') : null),
          h('div.item-meta', null, [a.email ? String(a.email) : '', last, a.created_at ? `added ${formatWhen(a.created_at).slice(0, 10)}` : ''].filter(Boolean).join(' · '))),
        h(`span.status-pill.${st.kind}`, { testid: 'user-state' }, st.label)),
      h('div.user-fields', null,
        h('label.field', null, h('span.field-label', null, 'Role'), role),
        h('label.field.budget-field', null, h('span.field-label', null, 'Tokens a day'),
          h('span.budget-row', null, budget,
            h('button.btn.small', { type: 'button', testid: 'user-budget-save', onclick: saveBudget }, 'Save')),
          h('span.field-hint', { testid: 'user-budget-text' }, budgetText(a.tokens_per_day)))),
      actions,
      msg);
    return li;
  }

  async reset(a, msg) {
    status(msg, 'Making a new link…', 'busy');
    try {
      const res = await this.api.post(`${userPath(a.name)}/reset`);
      status(msg, '');
      this.showLink(a.name, String(res.invite_url || ''), res.expires_at, 'Password reset');
      this.linkBox.scrollIntoView({ block: 'nearest' });
    } catch (err) {
      status(msg, err.message, 'error');
    }
  }

  confirmRemove(a, li, msg) {
    if (li.querySelector('.conv-confirm')) return;
    const bar = h('div.conv-confirm', { testid: 'user-remove-bar' },
      h('span', null, `Remove ${a.name} and everything they own — conversations, datasets, documents, keys, shares? The audit log keeps their records. This cannot be undone.`),
      h('button.btn.small.danger', { type: 'button', testid: 'user-remove-confirm', onclick: async () => {
        status(msg, 'Removing…', 'busy');
        try {
          await this.api.del(userPath(a.name));
          await this.loadUsers();
        } catch (err) {
          bar.remove();
          status(msg, err.message, 'error');
        }
      } }, `Remove ${a.name}`),
      h('button.btn.small', { type: 'button', onclick: () => bar.remove() }, 'Cancel'));
    li.append(bar);
    bar.querySelector('button').focus();
  }

  // ---------- sources ----------

  buildSources() {
    this.sourceList = h('ul.admin-list', { testid: 'admin-source-list' });
    this.sourcesStatus = h('p.panel-status', { role: 'status' });
    this.userOptions = h('datalist', { id: 'admin-user-names' });
    $('admin-sources').append(
      h('div.admin-head', null, h('h2', null, 'Database sources'), h('span.spacer'),
        h('button.btn.ghost.small', { type: 'button', onclick: () => this.loadSources() }, 'Refresh')),
      h('p.muted.small-text', null, 'Who may attach each database to their conversations. Sources are added with datachat sources add on the server.'),
      this.sourcesStatus, this.userOptions, this.sourceList);
  }

  async loadSources() {
    try {
      const [src, users] = await Promise.all([this.api.get(`${ADM}/sources`), this.api.get(`${ADM}/users`).catch(() => null)]);
      this.sources = listOf(src, 'sources');
      if (users) this.users = listOf(users, 'users');
      status(this.sourcesStatus, '');
    } catch (err) {
      this.sources = [];
      status(this.sourcesStatus, err.message, 'error');
    }
    clear(this.userOptions);
    for (const u of this.users) this.userOptions.append(h('option', { value: u.name }));
    clear(this.sourceList);
    if (!this.sources.length) this.sourceList.append(h('li.empty-item', null, 'No database sources. Add one on the server: datachat sources add NAME --url … --tables …'));
    for (const s of this.sources) this.sourceList.append(this.sourceRow(s));
  }

  sourceRow(s) {
    const li = h('li.admin-item.source-row', { testid: 'admin-source', dataset: { name: s.name } });
    const msg = h('p.panel-status', { testid: 'grant-status', role: 'status' });
    let users = [...(s.users || [])].map(String);
    const all = h('input', { type: 'checkbox', testid: 'grant-all' });
    all.checked = !!s.all_users;
    const chips = h('ul.chips', { testid: 'grant-users' });
    const add = h('input', { type: 'text', testid: 'grant-add', list: 'admin-user-names', placeholder: 'Add a user…', spellcheck: 'false', autocapitalize: 'off', 'aria-label': `Grant ${s.name} to` });
    const save = h('button.btn.small.primary', { type: 'button', testid: 'grant-save', disabled: true }, 'Save');
    const dirty = () => {
      const same = all.checked === !!s.all_users && users.length === (s.users || []).length && users.every((u) => (s.users || []).includes(u));
      save.disabled = same;
      li.classList.toggle('dirty', !same);
    };
    const renderChips = () => {
      clear(chips);
      chips.classList.toggle('muted-chips', all.checked);
      if (!users.length) chips.append(h('li.chip.empty', null, all.checked ? 'Everyone' : 'Nobody yet'));
      for (const u of users) {
        chips.append(h('li.chip', { testid: 'grant-user', dataset: { name: u } }, u,
          h('button.chip-x', { type: 'button', disabled: fromConfig, 'aria-label': `Take ${s.name} from ${u}`, onclick: () => { users = users.filter((x) => x !== u); renderChips(); dirty(); } }, icon('close', 12))));
      }
    };
    const addUsers = () => {
      const names = parseNames(add.value);
      if (!names.length) return;
      for (const n of names) if (!users.includes(n)) users.push(n);
      add.value = '';
      renderChips();
      dirty();
    };
    add.addEventListener('keydown', (e) => {
      if (e.key === 'Enter') {
        e.preventDefault();
        addUsers();
      }
    });
    all.addEventListener('change', () => { renderChips(); dirty(); });
    save.addEventListener('click', async () => {
      addUsers();
      save.disabled = true;
      status(msg, 'Saving…', 'busy');
      try {
        // Every user, or the named ones: the server takes one or the other.
        const body = all.checked ? { users: [], all_users: true } : { users, all_users: false };
        const updated = await this.api.put(`${ADM}/sources/${encodeURIComponent(s.name)}/grants`, body);
        const src = updated && updated.name ? updated : { ...s, users, all_users: all.checked };
        Object.assign(s, src);
        users = [...(s.users || [])].map(String);
        renderChips();
        dirty();
        status(msg, 'Saved: the new grants hold from the next query.', 'ok');
      } catch (err) {
        status(msg, err.message, 'error');
        dirty();
      }
    });
    const tables = (s.tables || []).map(String);
    // A source from serve's config file is granted there: the file would undo an edit here.
    const fromConfig = s.origin === 'config';
    if (fromConfig) for (const el of [all, add, save]) el.disabled = true;
    append(li, [
      h('div.user-head', null,
        h('span.item-icon', null, icon('data', 18)),
        h('div.item-main', null,
          h('div.user-row-name.mono', null, String(s.name)),
          h('div.item-meta', null, [kindLabel(s.kind), ORIGINS[s.origin] || ''].filter(Boolean).join(' · ')))),
      tables.length ? h('div.source-tables', { title: tables.join(', ') }, h('span.field-label', null, 'Tables '), tables.join(', ')) : null,
      fromConfig ? h('p.field-hint', { testid: 'grant-config' }, 'Whom it is granted to is set in serve’s config file (DATACHAT_SOURCES): change it there; serve applies the file when it starts.') : null,
      h('div.grant-box', null,
        h('label.check', null, all, ' Every user on this server'),
        chips,
        h('div.inline-form', null, add,
          h('button.btn.small', { type: 'button', testid: 'grant-add-button', onclick: addUsers }, 'Add'), save)),
      msg]);
    renderChips();
    return li;
  }

  // ---------- keys ----------

  buildKeys() {
    this.keyList = h('ul.admin-list', { testid: 'admin-key-list' });
    this.keysStatus = h('p.panel-status', { role: 'status', testid: 'admin-keys-status' });
    $('admin-keys').append(
      h('div.admin-head', null, h('h2', null, 'API keys'), h('span.spacer'),
        h('button.btn.ghost.small', { type: 'button', onclick: () => this.loadKeys() }, 'Refresh')),
      h('p.muted.small-text', null, 'Every user’s live keys. A revoked key stops working at once: its requests and chat sockets end. Users create their own under My keys.'),
      this.keysStatus, this.keyList);
  }

  async loadKeys() {
    let keys = [];
    try {
      keys = listOf(await this.api.get(`${ADM}/keys`), 'keys').filter((k) => k && !k.revoked_at);
      status(this.keysStatus, '');
    } catch (err) {
      status(this.keysStatus, err.message, 'error');
    }
    keys.sort((a, b) => String(a.user || '').localeCompare(String(b.user || '')) || String(b.created_at || '').localeCompare(String(a.created_at || '')));
    clear(this.keyList);
    if (!keys.length) this.keyList.append(h('li.empty-item', null, 'No live keys.'));
    for (const k of keys) {
      const prefix = String(k.prefix || '');
      const li = h('li.admin-item.key-row', { testid: 'admin-key', dataset: { id: String(k.id || ''), prefix, user: String(k.user || '') } });
      const msg = h('p.panel-status', { role: 'status' });
      const revoke = h('button.btn.small.danger', { type: 'button', testid: 'admin-key-revoke', onclick: () => {
        if (li.querySelector('.conv-confirm')) return;
        const bar = h('div.conv-confirm', null,
          h('span', null, `Revoke ${prefix ? `${prefix}…` : 'this key'} of ${k.user || 'its user'}? What uses it stops working at once.`),
          h('button.btn.small.danger', { type: 'button', testid: 'admin-key-revoke-confirm', onclick: async () => {
            status(msg, 'Revoking…', 'busy');
            try {
              await this.api.del(`${ADM}/keys/${encodeURIComponent(k.id)}`);
              await this.loadKeys();
            } catch (err) {
              bar.remove();
              status(msg, err.message, 'error');
            }
          } }, 'Revoke'),
          h('button.btn.small', { type: 'button', onclick: () => bar.remove() }, 'Cancel'));
        li.append(bar);
        bar.querySelector('button').focus();
      } }, 'Revoke');
      li.append(
        h('div.user-head', null,
          h('span.item-icon', null, icon('key', 18)),
          h('div.item-main', null,
            h('div.user-row-name.mono', null, prefix ? `${prefix}…` : 'key'),
            h('div.item-meta', null, [String(k.user || ''), k.created_at ? `created ${formatWhen(k.created_at)}` : '',
              k.last_used_at ? `last used ${relTime(k.last_used_at)}` : 'never used'].filter(Boolean).join(' · '))),
          revoke),
        msg);
      this.keyList.append(li);
    }
  }

  // ---------- usage ----------

  buildUsage() {
    this.usageDays = h('select', { testid: 'usage-days', 'aria-label': 'Days of usage' },
      [7, 30, 90, 365].map((d) => h('option', { value: String(d), selected: d === 30 }, `Last ${d} days`)));
    this.usageDays.value = '30';
    this.usageDays.addEventListener('change', () => this.loadUsage());
    this.usageStatus = h('p.panel-status', { role: 'status' });
    this.usageBody = h('div.usage-body');
    $('admin-usage').append(
      h('div.admin-head', null, h('h2', null, 'Token usage'), h('span.spacer'), this.usageDays),
      h('p.muted.small-text', null, 'Tokens the model used for each user’s answers, per day (UTC).'),
      this.usageStatus, this.usageBody);
  }

  async loadUsage() {
    let usage = [];
    try {
      usage = listOf(await this.api.get(`${ADM}/usage?days=${encodeURIComponent(this.usageDays.value)}`), 'usage');
      status(this.usageStatus, '');
    } catch (err) {
      status(this.usageStatus, err.message, 'error');
    }
    const sum = usageSummary(usage);
    clear(this.usageBody);
    if (!sum.rows.length) {
      this.usageBody.append(h('p.empty-item', { testid: 'usage-empty' }, 'No answers in this period.'));
      return;
    }
    const chart = h('div.usage-chart', { testid: 'usage-chart', role: 'img', 'aria-label': `Tokens per day, ${sum.perDay.length} days` },
      sum.perDay.map((d) => h('div.usage-bar', { title: `${d.day}: ${count(d.total)} tokens` },
        h('span.bar', { style: { height: `${sum.max ? Math.max(2, Math.round((d.total / sum.max) * 100)) : 0}%` } }),
        h('span.bar-label', null, d.day.slice(5)))));
    const perUser = h('ul.usage-users', { testid: 'usage-users' }, sum.perUser.map((u) =>
      h('li', null, h('span.mono', null, u.user), h('span.muted', null, `${count(u.turns)} answer${u.turns === 1 ? '' : 's'}`), h('strong', null, `${count(u.total)} tokens`))));
    const table = h('div.table-wrap.admin-table-wrap', null, h('table.result-table.usage-table', { testid: 'usage-table' },
      h('thead', null, h('tr', null, ['Day', 'User', 'Answers', 'Input', 'Output', 'Total'].map((c, i) => h('th', { class: i > 1 ? 'num' : null, scope: 'col' }, h('span.th-plain', null, c))))),
      h('tbody', null, sum.rows.map((r) => h('tr', { testid: 'usage-row', dataset: { user: r.user, day: r.day } },
        h('td', null, r.day), h('td.mono', null, r.user), h('td.num', null, count(r.turns)),
        h('td.num', null, count(r.input)), h('td.num', null, count(r.output)), h('td.num', null, count(r.total)))))));
    this.usageBody.append(chart, perUser, table);
  }

  // ---------- audit ----------

  buildAudit() {
    const f = {};
    const field = (name, label, el) => {
      f[name] = el;
      return h('label.field', null, h('span.field-label', null, label), el);
    };
    const kinds = h('datalist', { id: 'audit-kind-list' }, AUDIT_KINDS.map((k) => h('option', { value: k })));
    const outcome = h('select', { testid: 'audit-outcome' }, h('option', { value: '' }, 'Any'), AUDIT_OUTCOMES.map((o) => h('option', { value: o }, o)));
    this.auditLimit = h('select', { testid: 'audit-limit', 'aria-label': 'Events per page' }, [10, 50, 200].map((n) => h('option', { value: String(n), selected: n === 50 }, `${n} a page`)));
    this.auditLimit.value = '50';
    const form = h('form.audit-filters', { testid: 'audit-filters' },
      field('user', 'User', h('input', { type: 'text', testid: 'audit-user', spellcheck: 'false', autocapitalize: 'off', placeholder: 'who acted' })),
      field('source', 'Source', h('input', { type: 'text', testid: 'audit-source', spellcheck: 'false', autocapitalize: 'off', placeholder: 'database' })),
      field('kind', 'Kind', h('input', { type: 'text', testid: 'audit-kind', list: 'audit-kind-list', spellcheck: 'false', autocapitalize: 'off', placeholder: 'e.g. source.query' })),
      field('outcome', 'Outcome', outcome),
      field('since', 'Since', h('input', { type: 'text', testid: 'audit-since', spellcheck: 'false', placeholder: '2026-01-31 or 7d' })),
      field('until', 'Until', h('input', { type: 'text', testid: 'audit-until', spellcheck: 'false', placeholder: 'date, time or 36h' })),
      h('label.field', null, h('span.field-label', null, 'Page'), this.auditLimit),
      h('div.filter-buttons', null,
        h('button.btn.small.primary', { type: 'submit', testid: 'audit-apply' }, 'Apply'),
        h('button.btn.small.ghost', { type: 'button', testid: 'audit-clear', onclick: () => {
          for (const el of Object.values(f)) el.value = '';
          this.applyAudit();
        } }, 'Clear')),
      kinds);
    this.auditFields = f;
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      this.applyAudit();
    });
    this.auditStatus = h('p.panel-status', { role: 'status', testid: 'audit-status' });
    this.auditList = h('ul.admin-list.audit-list', { testid: 'audit-list' });
    this.auditPrev = h('button.btn.small', { type: 'button', testid: 'audit-newer', onclick: () => this.pageAudit(-1) }, 'Newer');
    this.auditNext = h('button.btn.small', { type: 'button', testid: 'audit-older', onclick: () => this.pageAudit(1) }, 'Older');
    this.auditPageLabel = h('span.muted.page-label', { testid: 'audit-page' });
    $('admin-audit').append(
      h('div.admin-head', null, h('h2', null, 'Audit log'), h('span.spacer'),
        h('button.btn.ghost.small', { type: 'button', onclick: () => this.loadAudit() }, 'Refresh')),
      form, this.auditStatus, this.auditList,
      h('div.pager', null, this.auditPrev, this.auditPageLabel, this.auditNext));
  }

  applyAudit() {
    const filters = {};
    for (const [k, el] of Object.entries(this.auditFields)) filters[k] = el.value.trim();
    this.audit = { filters, cursors: [''], page: 0, limit: Number(this.auditLimit.value) || 50 };
    this.loadAudit();
  }

  pageAudit(dir) {
    const p = this.audit.page + dir;
    if (p < 0 || p >= this.audit.cursors.length) return;
    this.audit.page = p;
    this.loadAudit();
  }

  async loadAudit() {
    const a = this.audit;
    const cursor = a.cursors[a.page] || '';
    status(this.auditStatus, 'Loading…', 'busy');
    let page;
    try {
      page = await this.api.get(`${ADM}/audit${auditQuery(a.filters, cursor, a.limit)}`);
      status(this.auditStatus, '');
    } catch (err) {
      status(this.auditStatus, err.message, 'error');
      return;
    }
    const events = listOf(page, 'events');
    a.cursors.length = a.page + 1;
    if (page && page.next_cursor) a.cursors.push(String(page.next_cursor));
    clear(this.auditList);
    if (!events.length) this.auditList.append(h('li.empty-item', { testid: 'audit-empty' }, a.page ? 'No older events.' : 'No events match these filters.'));
    for (const ev of events) this.auditList.append(auditItem(ev));
    this.auditPrev.disabled = a.page === 0;
    this.auditNext.disabled = a.page + 1 >= a.cursors.length;
    this.auditPageLabel.textContent = `Page ${a.page + 1}`;
  }
}

/** auditItem is one event: when, what, how it ended, who, and what it says. */
function auditItem(ev) {
  const outcome = String(ev.outcome || '');
  const facts = auditFacts(ev);
  return h('li.admin-item.audit-event', { testid: 'audit-event', dataset: { kind: String(ev.kind || ''), outcome, user: String(ev.user || '') } },
    h('div.audit-head', null,
      h('span.audit-kind.mono', null, String(ev.kind || '')),
      h(`span.status-pill.${outcome === 'ok' ? 'active' : outcome === 'refused' ? 'pending' : 'disabled'}`, null, outcome),
      h('span.audit-actor', null, actorText(ev)),
      h('span.spacer'),
      h('time.audit-time.muted', { datetime: String(ev.time || ''), title: relTime(ev.time) }, formatWhen(ev.time, { seconds: true }))),
    facts.length ? h('dl.audit-facts', null, facts.flatMap(([k, v]) => [h('dt', null, k), h(k === 'SQL' ? 'dd.mono.sql-fact' : 'dd', null, v)])) : null);
}
