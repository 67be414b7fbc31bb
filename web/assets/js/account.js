// The signed-in user: their name, role and how they signed in in the
// sidebar, and "My keys" — their own API keys, created (the secret shown
// once) and revoked (GET/POST /api/keys, DELETE /api/keys/{id}).

import { h, icon, clear, append } from './dom.js';
import { listOf } from './api.js';
import { roleLabel, authLabel, keyLabel, formatWhen, relTime } from './teams.js';

const $ = (id) => document.getElementById(id);

/** renderUser shows who is signed in (me: GET /api/me; null when the server did not say). */
export function renderUser(me) {
  const name = me && me.name ? String(me.name) : '';
  $('user-name').textContent = name || 'Signed in';
  $('user-name').title = me && me.email ? String(me.email) : name;
  $('user-avatar').textContent = name ? [...name][0].toUpperCase() : '?';
  const role = me ? roleLabel(me.role) : '';
  $('user-role').textContent = role;
  $('user-role').hidden = !role;
  $('user-role').dataset.role = me && me.role ? String(me.role) : '';
  const how = me ? authLabel(me.auth) : '';
  $('user-auth').textContent = how ? `by ${how}` : '';
}

/** copyText puts text on the clipboard, or selects the field holding it when the clipboard is refused. */
export async function copyText(text, btn, field) {
  try {
    await navigator.clipboard.writeText(text);
    if (btn) {
      const old = btn.textContent;
      btn.textContent = 'Copied';
      setTimeout(() => { btn.textContent = old; }, 1500);
    }
  } catch {
    if (field) {
      field.focus();
      field.select();
    }
  }
}

export class KeysDialog {
  /**
   * @param {() => import('./api.js').Api} api
   */
  constructor(api) {
    this.getApi = api;
    this.keys = [];
    this.dlg = $('keys-dialog');
    this.list = $('key-list');
    this.status = $('keys-status');
    $('key-create').addEventListener('click', () => this.create());
    $('keys-close').addEventListener('click', () => this.dlg.close());
    $('key-secret-copy').addEventListener('click', (e) => copyText($('key-secret-value').value, e.currentTarget, $('key-secret-value')));
    this.dlg.addEventListener('close', () => {
      // The secret is shown once: closing the dialog forgets it.
      $('key-secret-value').value = '';
      $('key-secret').hidden = true;
    });
  }

  get api() {
    return this.getApi();
  }

  say(text, kind = '') {
    clear(this.status);
    this.status.className = `panel-status ${kind}`;
    if (text) append(this.status, [kind === 'error' ? icon('alert', 15) : null, h('span', null, text)]);
  }

  async open() {
    this.say('');
    $('key-secret').hidden = true;
    $('key-secret-value').value = '';
    clear(this.list).append(h('li.empty-item', null, 'Loading…'));
    if (!this.dlg.open) this.dlg.showModal();
    await this.load();
  }

  async load() {
    try {
      this.keys = listOf(await this.api.get('/api/keys'), 'keys');
    } catch (err) {
      this.keys = [];
      this.say(err.message, 'error');
    }
    this.render();
  }

  async create() {
    const btn = $('key-create');
    btn.disabled = true;
    try {
      const k = await this.api.post('/api/keys', {});
      $('key-secret-value').value = String(k.key || '');
      $('key-secret').hidden = !k.key;
      $('key-secret-value').select();
      this.say('');
      await this.load();
    } catch (err) {
      this.say(err.message, 'error');
    } finally {
      btn.disabled = false;
    }
  }

  /** signsThisPage: the key this browser signed in with (revoking it signs out). */
  signsThisPage(k) {
    const own = this.api && this.api.key;
    return !!(own && k.prefix && own.startsWith(k.prefix));
  }

  confirmRevoke(k, li) {
    if (li.querySelector('.conv-confirm')) return;
    const bar = h('div.conv-confirm', { testid: 'key-revoke-confirm-bar' },
      h('span', null, this.signsThisPage(k)
        ? 'This browser signed in with this key: revoking it signs you out here. Revoke it?'
        : 'Scripts using this key stop working at once. Revoke it?'),
      h('button.btn.small.danger', { type: 'button', testid: 'key-revoke-confirm', onclick: () => this.revoke(k, li) }, 'Revoke'),
      h('button.btn.small', { type: 'button', onclick: () => bar.remove() }, 'Cancel'));
    li.append(bar);
    bar.querySelector('button').focus();
  }

  async revoke(k, li) {
    li.classList.add('removing');
    try {
      await this.api.del(`/api/keys/${encodeURIComponent(k.id)}`);
      await this.load();
      this.say(`Revoked ${keyLabel(k)}.`, 'ok'); // once the list shows it gone
    } catch (err) {
      li.classList.remove('removing');
      this.say(err.message, 'error');
    }
  }

  render() {
    clear(this.list);
    const live = this.keys.filter((k) => !k.revoked_at);
    if (!live.length) {
      this.list.append(h('li.empty-item', null, 'You have no keys. Create one for a script or an API client.'));
      return;
    }
    for (const k of live) {
      const li = h('li.item.key-item', { testid: 'key-item', dataset: { id: k.id, prefix: String(k.prefix || '') } });
      const meta = [
        k.created_at ? `created ${formatWhen(k.created_at)}` : '',
        k.last_used_at ? `last used ${relTime(k.last_used_at)}` : 'never used',
      ].filter(Boolean).join(' · ');
      li.append(h('div.item-head', null,
        h('span.item-icon', null, icon('key', 16)),
        h('div.item-main', null,
          h('div.item-name', null, keyLabel(k)),
          h('div.item-meta', null, meta)),
        h('button.btn.small.danger', { type: 'button', testid: 'key-revoke', 'aria-label': `Revoke ${keyLabel(k)}`, onclick: () => this.confirmRevoke(k, li) }, 'Revoke')));
      this.list.append(li);
    }
  }
}
