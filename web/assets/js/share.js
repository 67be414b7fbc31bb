// Sharing: the Share dialog of one's own conversation (named users or
// everyone signed in; listed and revoked: /api/conversations/{id}/shares),
// and the "Shared with me" list (GET /api/shared). The read-only view of a
// shared conversation is main.js's, which renders it with the owner's code.

import { h, icon, clear, append } from './dom.js';
import { listOf } from './api.js';
import { parseNames, shareLabel, relTime, formatWhen } from './teams.js';

const $ = (id) => document.getElementById(id);

export class ShareDialog {
  /** @param {() => import('./api.js').Api} api */
  constructor(api) {
    this.getApi = api;
    this.conv = null;
    this.shares = [];
    this.dlg = $('share-dialog');
    this.list = $('share-list');
    this.status = $('share-status');
    this.input = $('share-users');
    $('share-form').addEventListener('submit', (e) => {
      e.preventDefault();
      const names = parseNames(this.input.value);
      if (!names.length) {
        this.say('Enter the names of the people to share with, or share with everyone.', 'error');
        this.input.focus();
        return;
      }
      this.share({ users: names });
    });
    $('share-everyone').addEventListener('click', () => this.share({ everyone: true }));
    $('share-close').addEventListener('click', () => this.dlg.close());
  }

  get api() {
    return this.getApi();
  }

  base() {
    return `/api/conversations/${encodeURIComponent(this.conv.id)}/shares`;
  }

  say(text, kind = '') {
    clear(this.status);
    this.status.className = `panel-status ${kind}`;
    if (text) append(this.status, [kind === 'error' ? icon('alert', 15) : null, h('span', null, text)]);
  }

  /** open shows the dialog for one of the user's conversations. */
  async open(conv) {
    this.conv = conv;
    $('share-heading').textContent = `Share “${conv.title || 'New conversation'}”`;
    this.input.value = '';
    this.say('');
    this.shares = [];
    this.render(true);
    if (!this.dlg.open) this.dlg.showModal();
    this.input.focus();
    try {
      this.shares = listOf(await this.api.get(this.base()), 'shares');
    } catch (err) {
      this.say(err.message, 'error');
    }
    this.render(false);
  }

  async share(body) {
    const buttons = [$('share-submit'), $('share-everyone')];
    for (const b of buttons) b.disabled = true;
    try {
      const res = await this.api.post(this.base(), body);
      const added = listOf(res, 'shares');
      this.shares = [...this.shares.filter((s) => !added.some((a) => a.id === s.id)), ...added];
      this.input.value = '';
      this.say(body.everyone ? 'Shared with everyone signed in to this server.' : `Shared with ${body.users.join(', ')}.`, 'ok');
    } catch (err) {
      this.say(err.message, 'error'); // e.g. an unknown name, which the server names
    } finally {
      for (const b of buttons) b.disabled = false;
    }
    this.render(false);
  }

  async revoke(s, li) {
    li.classList.add('removing');
    try {
      await this.api.del(`${this.base()}/${encodeURIComponent(s.id)}`);
      this.shares = this.shares.filter((x) => x.id !== s.id);
      this.say(`${shareLabel(s)} no longer sees this conversation.`, 'ok');
    } catch (err) {
      li.classList.remove('removing');
      this.say(err.message, 'error');
    }
    this.render(false);
  }

  render(loading) {
    clear(this.list);
    const everyone = this.shares.some((s) => s.everyone);
    $('share-everyone').hidden = everyone;
    if (loading) {
      this.list.append(h('li.empty-item', null, 'Loading…'));
      return;
    }
    if (!this.shares.length) {
      this.list.append(h('li.empty-item', null, 'Nobody yet: only you see this conversation.'));
      return;
    }
    const sorted = [...this.shares].sort((a, b) => Number(!!b.everyone) - Number(!!a.everyone) || shareLabel(a).localeCompare(shareLabel(b)));
    for (const s of sorted) {
      const li = h('li.item.share-item', { testid: 'share-item', dataset: { id: s.id, user: s.everyone ? '' : String(s.user || ''), everyone: s.everyone ? 'true' : 'false' } });
      li.append(h('div.item-head', null,
        h('span.item-icon', null, icon(s.everyone ? 'users' : 'user', 16)),
        h('div.item-main', null,
          h('div.item-name.plain', null, shareLabel(s)),
          h('div.item-meta', { title: formatWhen(s.created_at) }, s.created_at ? `since ${relTime(s.created_at)}` : '')),
        h('button.btn.small.danger', { type: 'button', testid: 'share-revoke', 'aria-label': `Stop sharing with ${shareLabel(s)}`, onclick: () => this.revoke(s, li) }, 'Revoke')));
      this.list.append(li);
    }
  }
}

/**
 * renderSharedList fills the sidebar's "Shared with me" with the
 * conversations others share with the user; the section hides when none.
 */
export function renderSharedList(items, activeId, onOpen) {
  const list = $('shared-list');
  clear(list);
  $('shared-section').hidden = !items.length;
  const sorted = [...items].sort((a, b) => String(b.shared_at || b.updated_at || '').localeCompare(String(a.shared_at || a.updated_at || '')));
  for (const c of sorted) {
    const active = activeId === c.id;
    const li = h('li.conv-item.shared-item', { testid: 'shared-item', class: active ? 'active' : null, dataset: { id: c.id }, 'aria-current': active ? 'true' : null });
    const owner = String(c.owner || '');
    const btn = h('button.conv-open', { type: 'button', title: `${c.title || 'Untitled'}${owner ? ` — shared by ${owner}` : ''}` },
      h('span.conv-title-text', null, c.title || 'Untitled'),
      h('span.conv-time', null, [owner ? `from ${owner}` : '', relTime(c.shared_at || c.updated_at)].filter(Boolean).join(' · ')));
    btn.addEventListener('click', () => onOpen(c.id));
    li.append(btn);
    list.append(li);
  }
}
