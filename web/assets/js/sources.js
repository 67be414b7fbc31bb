// The data panel's Databases section: the database sources the operator
// granted to this user (GET /api/sources), each attached to or detached from
// the open conversation (POST/DELETE /api/conversations/{id}/sources). The
// section stays hidden for a user who has none.

import { h, icon, clear, append } from './dom.js';
import { listOf } from './api.js';

const KIND_LABELS = { postgres: 'PostgreSQL', mysql: 'MySQL / MariaDB' };

/** kindLabel names a source's engine for people. */
export function kindLabel(kind) {
  return KIND_LABELS[kind] || String(kind || '');
}

export class SourcesSection {
  /**
   * @param {object} o
   * @param {() => import('./api.js').Api} o.api returns the signed-in API client
   * @param {() => Promise<string>} o.ensureConversation returns the open conversation's id, creating one if needed
   * @param {() => void} [o.onChange] called when the attached sources change (the Data badge counts them)
   */
  constructor({ api, ensureConversation, onChange = () => {} }) {
    this.getApi = api;
    this.onChange = onChange;
    this.ensureConversation = ensureConversation;
    this.convId = null;
    this.granted = [];
    this.attached = new Set();
    this.gen = 0;
    this.section = document.getElementById('source-section');
    this.list = document.getElementById('source-list');
    this.status = document.getElementById('source-status');
  }

  get api() {
    return this.getApi();
  }

  base() {
    return `/api/conversations/${encodeURIComponent(this.convId)}/sources`;
  }

  /** load shows the user's sources and which the conversation has (null: none open). */
  async load(convId) {
    const gen = ++this.gen;
    this.convId = convId;
    this.attached = new Set();
    this.setStatus('');
    try {
      const [granted, attached] = await Promise.all([
        this.api.get('/api/sources'),
        convId ? this.api.get(this.base()) : null,
      ]);
      if (gen !== this.gen) return;
      this.granted = listOf(granted, 'sources');
      this.attached = new Set(listOf(attached, 'sources').map((s) => s.name));
    } catch (err) {
      if (gen !== this.gen) return;
      this.setStatus(err.message, 'error');
    }
    this.render();
  }

  setStatus(text, kind = '') {
    clear(this.status);
    this.status.className = `panel-status ${kind}`;
    if (text) append(this.status, [kind === 'error' ? icon('alert', 15) : null, h('span', null, text)]);
  }

  async toggle(src, btn) {
    btn.disabled = true;
    const attach = !this.attached.has(src.name);
    try {
      if (attach) {
        await this.ensureConversation();
        await this.api.post(this.base(), { name: src.name });
        this.attached.add(src.name);
        this.setStatus(`Attached ${src.name}: the assistant can query it in this conversation.`, 'ok');
      } else {
        await this.api.del(`${this.base()}/${encodeURIComponent(src.name)}`);
        this.attached.delete(src.name);
        this.setStatus(`Detached ${src.name}.`, 'ok');
      }
    } catch (err) {
      this.setStatus(err.message, 'error');
      if (err.status === 404) this.load(this.convId); // removed or no longer granted
    }
    this.render();
  }

  render() {
    clear(this.list);
    this.section.hidden = !this.granted.length;
    this.onChange();
    for (const s of this.granted) {
      const on = this.attached.has(s.name);
      const tables = (s.tables || []).join(', ');
      const li = h('li.item.source-item', { testid: 'source-item', dataset: { name: s.name, attached: on ? 'true' : 'false' } });
      const btn = h('button.btn.small.source-toggle', {
        type: 'button', testid: 'source-attach', 'aria-pressed': on ? 'true' : 'false',
        title: on ? `Detach ${s.name} from this conversation` : `Let the assistant query ${s.name} in this conversation`,
      }, on ? 'Detach' : 'Attach');
      btn.addEventListener('click', () => this.toggle(s, btn));
      append(li, [
        h('div.item-head', null,
          h('span.item-icon', null, icon('data', 16)),
          h('div.item-main', null,
            h('div.item-name', { title: s.name }, s.name),
            h('div.item-meta', null, [kindLabel(s.kind), on ? 'attached' : null].filter(Boolean).join(' · '))),
          btn),
        tables ? h('div.item-source', { title: `Tables it may read: ${tables}` }, tables) : null,
      ]);
      this.list.append(li);
    }
  }
}
