// Verified examples: the user's marks on SQL cards. An answer's query can be
// marked correct (as it is, or edited first: the edit runs again) or wrong; a
// correct one is kept for the user and given to the model in later turns
// over tables with the same columns. Examples holds the user's list, which
// the cards and the data panel share.

import { h, icon, clear, append, formatCount } from './dom.js';
import { highlightedSQL, ResultView, questionOf } from './cards.js';

export class Examples {
  /** @param {() => import('./api.js').Api} api */
  constructor(api) {
    this.getApi = api;
    this.list = [];
    this.listeners = new Set();
  }

  get api() {
    return this.getApi();
  }

  /** subscribe calls fn after every change; returns the unsubscriber. */
  subscribe(fn) {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  notify() {
    for (const fn of this.listeners) fn(this.list);
  }

  async load() {
    try {
      const data = await this.api.get('/api/examples');
      this.list = (data && Array.isArray(data.examples)) ? data.examples : [];
    } catch {
      this.list = [];
    }
    this.notify();
  }

  /** of returns the example marked on an answer's tool call, or null. */
  of(messageId, callId) {
    return this.list.find((e) => e.message_id === messageId && e.call_id === callId) || null;
  }

  /** mark posts a verdict; the answer is the example, with `result` when the query ran. */
  async mark(body) {
    const ex = await this.api.post('/api/examples', body);
    this.list = [ex, ...this.list.filter((e) => e.id !== ex.id)];
    this.notify();
    return ex;
  }

  async remove(ex) {
    await this.api.del(`/api/examples/${encodeURIComponent(ex.id)}`);
    this.list = this.list.filter((e) => e.id !== ex.id);
    this.notify();
  }
}

/**
 * verifyAnswer adds the verdict bar to each SQL card of an answer whose
 * query ran, now that its message id is known (a streamed answer's at
 * chat_complete, a stored one's at once); not to a query run in a database
 * source, since examples are over the datasets. view.ctx.verify holds
 * {examples, conversationId}.
 */
export function verifyAnswer(view, messageId) {
  const v = view && view.ctx && view.ctx.verify;
  if (!v || !messageId) return;
  for (const [callId, card] of view.cards) {
    if (!card || !card.el || card.el.dataset.testid !== 'sql-card' || card.verifyBar) continue;
    if (card.el.dataset.state !== 'ok') continue;
    if (card.source) continue; // a database source's query: examples are over the datasets
    card.verifyBar = new VerifyBar(card, { ...v, messageId, callId });
  }
}

const LABELS = { correct: 'Marked correct: kept as a verified example', wrong: 'Marked wrong' };

class VerifyBar {
  constructor(card, { examples, conversationId, messageId, callId }) {
    this.card = card;
    this.examples = examples;
    this.conversationId = conversationId;
    this.messageId = messageId;
    this.callId = callId;
    this.el = h('div.verify', { testid: 'sql-verify' });
    this.unsubscribe = examples.subscribe(() => this.render());
    card.el.querySelector('.card-body').append(this.el);
    this.render();
  }

  body(extra) {
    const conv = typeof this.conversationId === 'function' ? this.conversationId() : this.conversationId;
    return { conversation_id: conv, message_id: this.messageId, call_id: this.callId, ...extra };
  }

  render(message = '', kind = '') {
    if (this.editing) return;
    if (this.rendered && !this.card.el.isConnected) {
      this.unsubscribe(); // the answer left the page
      return;
    }
    this.rendered = true;
    clear(this.el);
    const ex = this.examples.of(this.messageId, this.callId);
    const verdict = ex ? ex.verdict : '';
    this.card.el.dataset.verdict = verdict;
    const btn = (label, iconName, testid, onclick, pressed) => h('button.btn.small.ghost', {
      type: 'button', testid, onclick, 'aria-pressed': pressed === undefined ? null : String(pressed),
    }, icon(iconName, 14), label);
    // append() skips the absent Undo; Element.append would write it as the text "null".
    append(this.el, [
      h('span.verify-label', { testid: 'sql-verdict' }, verdict ? LABELS[verdict] : 'Is this query right?'),
      h('span.spacer'),
      btn('Correct', 'check', 'sql-mark-correct', () => this.mark('correct'), verdict === 'correct'),
      btn('Wrong', 'close', 'sql-mark-wrong', () => this.mark('wrong'), verdict === 'wrong'),
      btn('Edit', 'edit', 'sql-edit', () => this.edit()),
      ex ? btn('Undo', 'trash', 'sql-unmark', () => this.unmark(ex)) : null]);
    if (ex && ex.sql && ex.sql.trim() !== String(this.card.query).trim()) {
      // Marked with an edit (the answer shows the query as the model wrote it).
      this.el.append(h('div.verify-edited', null, 'Kept as edited:', h('pre.example-sql', null, ex.sql)));
    }
    if (message) this.el.append(h(`div.verify-msg.${kind || 'info'}`, { role: 'status' }, message));
  }

  /** send posts a verdict (sql: an edit); an edited query's new result goes in the card. */
  async send(verdict, sql) {
    const ex = await this.examples.mark(this.body(sql === undefined ? { verdict } : { verdict, sql }));
    if (ex.result) this.showResult(ex.sql, ex.result);
    return ex;
  }

  async mark(verdict) {
    for (const b of this.el.querySelectorAll('button')) b.disabled = true;
    try {
      await this.send(verdict);
    } catch (err) {
      this.render(err.message || 'Not saved.', 'error');
    }
  }

  async unmark(ex) {
    try {
      await this.examples.remove(ex);
    } catch (err) {
      this.render(err.message || 'Not removed.', 'error');
    }
  }

  /** showResult puts an edited query and its new result in the card. */
  showResult(sql, result) {
    const card = this.card;
    card.query = sql;
    const pre = card.el.querySelector('pre.sql');
    if (pre) clear(pre).append(highlightedSQL(sql));
    if (card.status) {
      const n = result.row_count ?? (result.rows || []).length;
      clear(card.status).append(icon('check', 14), `${formatCount(n)} row${n === 1 ? '' : 's'} · edited`);
    }
    clear(card.result).append(new ResultView(result, { query: sql, note: 'The edited query, run again.', title: () => questionOf(card.el) }).el);
  }

  edit() {
    this.editing = true;
    clear(this.el);
    const input = h('textarea.sql-edit-input', { testid: 'sql-edit-input', rows: '5', spellcheck: 'false', 'aria-label': 'Edit the SQL query' });
    input.value = this.card.query;
    const status = h('div.verify-msg.info', { role: 'status' }, 'The edited query runs again; it is kept as correct only if it succeeds.');
    const run = h('button.btn.small.primary', {
      type: 'button', testid: 'sql-edit-save',
      onclick: async () => {
        run.disabled = true;
        status.className = 'verify-msg info';
        clear(status).append('Running…');
        try {
          await this.send('correct', input.value);
          this.editing = false;
          this.render();
        } catch (err) {
          run.disabled = false;
          status.className = 'verify-msg error';
          clear(status).append(err.message || 'Not saved.');
        }
      },
    }, 'Run and mark correct');
    const cancel = h('button.btn.small.ghost', { type: 'button', onclick: () => { this.editing = false; this.render(); } }, 'Cancel');
    this.el.append(input, h('div.verify-edit-bar', null, run, cancel), status);
    input.focus();
  }
}
