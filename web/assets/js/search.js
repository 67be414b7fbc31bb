// Conversation search in the sidebar: a search box over the list whose
// results (GET /api/search: titles and message text) replace the list while
// a search is typed, each with the words around the match.

import { h, icon, clear, append } from './dom.js';
import { listOf } from './api.js';
import { relTime } from './teams.js';

/**
 * markMatches splits text around each case-insensitive occurrence of term:
 * [{text, match}] parts, for <mark>ing them without parsing anything as HTML.
 */
export function markMatches(text, term) {
  const s = String(text ?? '');
  const t = String(term ?? '').trim().toLowerCase();
  if (!t) return [{ text: s, match: false }];
  const lower = s.toLowerCase();
  if (lower.length !== s.length) return [{ text: s, match: false }];
  const out = [];
  let at = 0;
  for (let i = lower.indexOf(t); i >= 0; i = lower.indexOf(t, i + t.length)) {
    if (i > at) out.push({ text: s.slice(at, i), match: false });
    out.push({ text: s.slice(i, i + t.length), match: true });
    at = i + t.length;
  }
  if (at < s.length) out.push({ text: s.slice(at), match: false });
  return out;
}

const marked = (text, term) => markMatches(text, term).map((p) => (p.match ? h('mark', null, p.text) : p.text));

export class ConversationSearch {
  /**
   * @param {object} o
   * @param {() => import('./api.js').Api} o.api
   * @param {(id: string) => void} o.onOpen opens a conversation found
   * @param {() => string|null} o.current the open conversation's id
   * @param {number} [o.maxChars] the longest search the server takes
   */
  constructor({ api, onOpen, current, maxChars = 200 }) {
    this.getApi = api;
    this.onOpen = onOpen;
    this.current = current;
    this.gen = 0;
    this.timer = null;
    this.convList = document.getElementById('conversation-list');
    this.input = h('input.search-input', {
      type: 'search', testid: 'conversation-search', placeholder: 'Search conversations', 'aria-label': 'Search conversations',
      maxlength: String(maxChars), autocomplete: 'off', spellcheck: 'false',
    });
    this.form = h('form.conv-search', { role: 'search', onsubmit: (e) => { e.preventDefault(); this.run(); } },
      icon('search', 16), this.input);
    this.results = h('ul.conv-list.search-results', { testid: 'search-results', 'aria-live': 'polite', hidden: true });
    document.getElementById('new-conversation').after(this.form);
    this.convList.before(this.results);
    this.input.addEventListener('input', () => {
      clearTimeout(this.timer);
      // Wait for a pause in typing before asking the server.
      this.timer = setTimeout(() => this.run(), 200);
    });
    this.input.addEventListener('keydown', (e) => {
      if (e.key === 'Escape' && this.input.value) {
        e.preventDefault();
        e.stopPropagation();
        this.clear();
      }
    });
  }

  get api() {
    return this.getApi();
  }

  get active() {
    return this.input.value.trim() !== '';
  }

  /** clear ends the search and shows the list again. */
  clear() {
    clearTimeout(this.timer);
    this.gen++;
    this.input.value = '';
    this.show(false);
  }

  show(searching) {
    this.results.hidden = !searching;
    this.convList.hidden = searching;
  }

  async run() {
    clearTimeout(this.timer);
    const q = this.input.value.trim();
    const gen = ++this.gen;
    if (!q) {
      this.show(false);
      return;
    }
    this.show(true);
    this.results.setAttribute('aria-busy', 'true');
    let found;
    try {
      found = listOf(await this.api.get(`/api/search?q=${encodeURIComponent(q)}`), 'conversations');
    } catch (err) {
      if (gen !== this.gen) return;
      this.results.removeAttribute('aria-busy');
      clear(this.results).append(h('li.conv-empty', { role: 'alert' }, err.message || 'The search failed.'));
      return;
    }
    if (gen !== this.gen) return;
    this.results.removeAttribute('aria-busy');
    this.render(found, q);
  }

  render(found, q) {
    clear(this.results);
    if (!found.length) {
      this.results.append(h('li.conv-empty', { testid: 'search-empty' }, `No conversation mentions “${q}”.`));
      return;
    }
    const current = this.current();
    for (const c of found) {
      const active = current === c.id;
      const btn = h('button.conv-open', { type: 'button', title: String(c.title || '') },
        h('span.conv-title-text', null, marked(c.title || 'New conversation', q)),
        h('span.conv-time', null, relTime(c.updated_at)));
      const li = h('li.conv-item.search-result', { testid: 'search-result', class: active ? 'active' : null, dataset: { id: c.id } }, btn);
      if (c.snippet) append(btn, [h('span.search-snippet', null, marked(c.snippet, q))]);
      btn.addEventListener('click', () => this.onOpen(c.id));
      this.results.append(li);
    }
  }
}
