// Messages: user bubbles and assistant answers. An assistant answer is a list
// of parts in the order they streamed: Markdown text, tool cards, more text.

import { h, icon, clear, renderTree, formatCount } from './dom.js';
import { parseMarkdown, textOf } from './markdown.js';
import { createToolCard, sourceLabel, highlightedSQL } from './cards.js';
import { parseSourcesText, formatCell } from './table.js';
import { verifyAnswer } from './verify.js';

const STATUS_LABELS = {
  cancelled: 'Stopped',
  interrupted: 'Interrupted',
  error: 'Failed',
  awaiting_confirmation: 'Waiting for your approval',
  streaming: 'Still being written',
};

/**
 * forReader is a source as the citation popover shows it: its page and its
 * section (the heading path, as "heading"), without the retrieval score — a
 * ranking number ("score 7.18") that tells a reader nothing.
 */
export function forReader(src) {
  const { score, distance, ...rest } = src || {};
  const m = { ...(rest.metadata || {}) };
  if (!m.heading && m.section) m.heading = String(m.section);
  return { ...rest, metadata: m };
}

/** describeCell says which result cell a checked number is: "row 1, n: 152 in the query result". */
function describeCell(view, row, col) {
  const c = view.columns[col];
  const r = view.rows[row];
  if (!c || !r) return `in the query result, row ${Number(row) + 1}`;
  return `in the query result, row ${row + 1}, column ${c.name} (${formatCell(r[col], c.type, c.name)})`;
}

export function userMessage(text) {
  return h('article.msg.user', { testid: 'message-user' }, h('div.bubble', null, text));
}

/**
 * userSQL is SQL the user ran from the composer: the same card an answer's
 * query gets (table, chart, CSV), on the user's side. tc, when given, is the
 * stored tool call of a reopened conversation; owner names who ran it when
 * it was not the reader (a shared conversation).
 */
export function userSQL(query, tc, owner = '') {
  const card = createToolCard('execute_sql', { query });
  if (tc) card.setStored(tc);
  const el = h('article.msg.user.user-sql', { testid: 'message-user' },
    h('div.user-sql-label', null, owner ? `${owner} ran` : 'You ran'), card.el);
  return { el, card };
}

/** errorBlock shows a chat_error: message, reason and suggested action. */
export function errorBlock(ev) {
  return h('div.chat-error', { testid: 'chat-error', role: 'alert' },
    h('span.chat-error-icon', null, icon('alert', 18)),
    h('div', null,
      h('div.chat-error-msg', null, String(ev.message || 'Something went wrong.')),
      ev.reason ? h('div.chat-error-reason', null, String(ev.reason)) : null,
      ev.suggested_action ? h('div.chat-error-action', null, h('strong', null, 'What to do: '), String(ev.suggested_action)) : null));
}

export class AssistantView {
  /**
   * @param {object} ctx
   * @param {(anchor: Element, source: object, n: number) => void} ctx.showSource
   * @param {() => void} [ctx.onDatasetLoaded]
   * @param {() => void} [ctx.onReview] reopen the pending confirmation
   */
  constructor(ctx) {
    this.ctx = ctx;
    this.parts = []; // {kind:'md', text, el} | {kind:'card', card}
    this.cards = new Map();
    this.sources = [];
    this.sourceMap = new Map(); // citation number → source (reopened answers)
    this.renderQueued = false;
    this.partsEl = h('div.parts');
    this.typing = h('div.typing', { 'aria-label': 'Thinking' }, h('span'), h('span'), h('span'));
    this.extra = h('div.msg-extra');
    this.foot = h('div.msg-foot');
    this.el = h('article.msg.assistant', { testid: 'message-assistant', dataset: { status: 'streaming' } },
      h('div.avatar', { 'aria-hidden': 'true' }, 'dc'),
      h('div.msg-body', null, this.partsEl, this.typing, this.extra, this.foot));
  }

  setWaiting(on) {
    this.typing.hidden = !on;
  }

  lastMD() {
    const last = this.parts[this.parts.length - 1];
    if (last && last.kind === 'md') return last;
    const part = { kind: 'md', text: '', el: h('div.md') };
    this.parts.push(part);
    this.partsEl.append(part.el);
    return part;
  }

  appendToken(token) {
    this.setWaiting(false);
    this.lastMD().text += token;
    this.queueRender();
  }

  queueRender() {
    if (this.renderQueued) return;
    this.renderQueued = true;
    requestAnimationFrame(() => {
      this.renderQueued = false;
      this.renderText();
    });
  }

  renderText() {
    let changed = false;
    for (const p of this.parts) {
      if (p.kind !== 'md') continue;
      if (p.rendered === p.text && p.renderedSources === this.sources) continue;
      clear(p.el).append(renderTree(parseMarkdown(p.text), (n) => this.cite(n)));
      p.rendered = p.text;
      p.renderedSources = this.sources;
      changed = true;
    }
    if (changed && this.numberChecks) this.markNumbers();
  }

  /**
   * markNumbers marks each checked number of the answer's text: a matched
   * one links to where it came from (the result cell, the question, an
   * excerpt); an unmatched one is flagged. A check's offsets count the
   * characters of the answer's text, whose text parts are its pieces in order.
   */
  markNumbers() {
    let offset = 0;
    const spans = this.parts.filter((p) => p.kind === 'md').map((p) => {
      const len = Array.from(p.text).length;
      const span = { part: p, start: offset, end: offset + len };
      offset += len;
      return span;
    });
    const cursors = new Map(); // part → [text node index, offset] searched up to
    for (const c of this.numberChecks) {
      const span = spans.find((sp) => c.start >= sp.start && c.start < sp.end);
      if (!span) continue;
      const nodes = [];
      const walker = document.createTreeWalker(span.part.el, NodeFilter.SHOW_TEXT, {
        acceptNode: (n) => (n.parentElement && n.parentElement.closest('code, pre, .num-check') ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT),
      });
      for (let n = walker.nextNode(); n; n = walker.nextNode()) nodes.push(n);
      let [ni, off] = cursors.get(span.part) || [0, 0];
      for (; ni < nodes.length; ni++, off = 0) {
        const i = nodes[ni].data.indexOf(c.text, off);
        if (i < 0) continue;
        const node = nodes[ni];
        const after = node.splitText(i);
        after.splitText(c.text.length);
        const mark = this.numberMark(c);
        after.replaceWith(mark);
        mark.append(after);
        cursors.set(span.part, [ni + 1, 0]);
        break;
      }
    }
  }

  numberMark(c) {
    const src = c.source || null;
    if (c.status !== 'matched' || !src) {
      const el = h('span.num-check.num-unmatched', { testid: 'number-check', dataset: { status: 'unmatched' }, tabindex: '0', role: 'button',
        'aria-expanded': 'false', title: 'Not found in this answer’s query results: check it' });
      this.onActivate(el, () => this.explainNumber(c, el));
      return el;
    }
    let title = 'Found in this answer’s evidence';
    if (src.question) title = 'From your question';
    else if (src.source_id) title = 'From a cited excerpt';
    else if (src.tool_call_id) {
      const card = this.cards.get(src.tool_call_id);
      title = (card && card.describe && card.describe(src.row, src.column)) ||
        (src.row === null || src.row === undefined ? 'The row count of the query result' : `From the query result: row ${src.row + 1}, column ${src.column + 1}`);
    }
    const el = h('span.num-check.num-matched', { testid: 'number-check', dataset: { status: 'matched' }, tabindex: '0', role: 'button', 'aria-expanded': 'false', title });
    this.onActivate(el, () => {
      const open = this.explainNumber(c, el);
      if (!open || !src.tool_call_id) return;
      const card = this.cards.get(src.tool_call_id);
      if (card && card.highlight) card.highlight(src.row, src.column);
    });
    return el;
  }

  /** onActivate runs fn on a click or tap, and on Enter or Space. */
  onActivate(el, fn) {
    el.addEventListener('click', (e) => {
      e.stopPropagation();
      fn();
    });
    el.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' || e.key === ' ') {
        e.preventDefault();
        fn();
      }
    });
  }

  /**
   * explainNumber shows, under the text holding a checked number's mark,
   * what the check found: where a matched number came from (the result
   * cell and the query, the question, an excerpt), or that an unmatched one
   * was not found — on a touch screen, where a tooltip never shows. A second
   * tap on the same mark closes it. Returns whether it is now open.
   */
  explainNumber(c, mark) {
    const old = this.explainEl;
    if (old) {
      old.remove();
      if (old.mark) old.mark.setAttribute('aria-expanded', 'false');
      this.explainEl = null;
      if (old.mark === mark) return false;
    }
    const src = c.source || null;
    const matched = c.status === 'matched' && !!src;
    const num = h('strong', null, String(c.text || ''));
    const body = [];
    if (!matched) {
      body.push(h('p', null, num, ' is not found in this answer’s query results — check it.'));
    } else if (src.question) {
      body.push(h('p', null, num, ' is from your question.'));
    } else if (src.source_id) {
      const s = this.sources.find((x) => x && x.id === src.source_id);
      body.push(h('p', null, num, ` is in a cited excerpt${s ? `: ${sourceLabel(s)}` : ''}.`));
    } else if (src.tool_call_id) {
      const card = this.cards.get(src.tool_call_id);
      const where = card && card.view
        ? (src.row === null || src.row === undefined ? 'the row count of the query result' : describeCell(card.view, src.row, src.column))
        : 'the query result';
      body.push(h('p', null, num, ` is ${where}.`));
      if (card && card.query) body.push(h('pre.sql.num-explain-sql', null, highlightedSQL(card.query)));
    } else {
      body.push(h('p', null, num, ' is in this answer’s evidence.'));
    }
    const box = h(`div.num-explain.${matched ? 'matched' : 'unmatched'}`, { testid: 'number-explain', role: 'status', dataset: { status: matched ? 'matched' : 'unmatched' } },
      h('span.num-explain-icon', { 'aria-hidden': 'true' }, icon(matched ? 'check' : 'alert', 14)),
      h('div.num-explain-body', null, body),
      h('button.icon-btn.small.num-explain-close', { type: 'button', 'aria-label': 'Close', title: 'Close', onclick: () => this.explainNumber(c, mark) }, icon('close', 13)));
    box.mark = mark;
    // Under the paragraph (or the whole list, table or quote) holding the mark.
    const md = mark.closest('.md');
    const outer = mark.closest('ul, ol, table, blockquote');
    const anchor = (outer && md && md.contains(outer) ? outer : null) || mark.closest('p, h1, h2, h3, h4, h5, h6') || md || mark;
    anchor.after(box);
    mark.setAttribute('aria-expanded', 'true');
    this.explainEl = box;
    return true;
  }

  cite(n) {
    const src = this.sources[n - 1] || this.sourceMap.get(n);
    if (!src) return h('sup.cite-missing', { title: 'Source not available for this answer' }, `[${n}]`);
    const b = h('button.cite', { type: 'button', title: sourceLabel(src), 'aria-label': `Source ${n}: ${sourceLabel(src)}` }, String(n));
    b.addEventListener('click', (e) => {
      e.stopPropagation();
      this.ctx.showSource(b, forReader(src), n);
    });
    return h('sup.cite-wrap', null, b);
  }

  toolStart(ev) {
    this.setWaiting(false);
    const card = createToolCard(ev.tool, ev.args, { onDatasetLoaded: this.ctx.onDatasetLoaded });
    this.cards.set(ev.id, card);
    this.parts.push({ kind: 'card', card });
    this.partsEl.append(card.el);
    this.setWaiting(true);
  }

  toolResult(ev) {
    let card = this.cards.get(ev.id);
    if (!card) {
      this.toolStart({ id: ev.id, tool: ev.tool, args: {} });
      card = this.cards.get(ev.id);
    }
    card.setResult(ev);
  }

  /** complete applies chat_complete: status, usage, sources. */
  complete(ev) {
    this.setWaiting(false);
    if (Array.isArray(ev.sources)) this.sources = ev.sources;
    if (Array.isArray(ev.number_checks) && ev.number_checks.length) {
      this.numberChecks = ev.number_checks;
      for (const p of this.parts) if (p.kind === 'md') p.rendered = null; // render again, with the marks
    }
    this.setStatus(ev.status || 'complete');
    this.setUsage(ev.input_tokens, ev.output_tokens, ev.total_tokens);
    this.renderText();
    this.ensureNotEmpty();
    verifyAnswer(this, ev.message_id);
  }

  error(ev) {
    this.setWaiting(false);
    this.setStatus('error', false);
    this.extra.append(errorBlock(ev));
    this.renderText();
  }

  setStatus(status, badge = true) {
    this.el.dataset.status = status;
    const old = this.foot.querySelector('.status-badge');
    if (old) old.remove();
    const label = STATUS_LABELS[status];
    if (badge && label && status !== 'awaiting_confirmation') this.foot.prepend(h(`span.status-badge.s-${status}`, null, label));
  }

  setUsage(input, output, total) {
    const i = Number(input) || 0;
    const o = Number(output) || 0;
    const t = Number(total) || i + o;
    const old = this.foot.querySelector('.usage');
    if (old) old.remove();
    if (!t) return;
    this.foot.append(h('span.usage', { testid: 'usage', title: 'Tokens used by this answer (every model call of the turn)' },
      `${formatCount(t)} tokens`, h('span.usage-detail', null, ` · ${formatCount(i)} in · ${formatCount(o)} out`)));
  }

  /** awaiting marks the answer as waiting for approval, with a way back to the dialog. */
  awaiting() {
    this.setWaiting(false);
    this.setStatus('awaiting_confirmation');
    if (this.awaitEl) this.awaitEl.remove();
    this.awaitEl = h('div.awaiting', null, icon('alert', 16), h('span', null, 'Waiting for your approval.'),
      h('button.btn.small', { type: 'button', onclick: () => this.ctx.onReview && this.ctx.onReview() }, 'Review'));
    this.extra.append(this.awaitEl);
  }

  clearAwaiting() {
    if (this.awaitEl) this.awaitEl.remove();
    this.awaitEl = null;
    if (this.el.dataset.status === 'awaiting_confirmation') this.setStatus('streaming');
  }

  ensureNotEmpty() {
    if (!this.parts.length && !this.extra.childNodes.length && this.el.dataset.status === 'complete') {
      this.partsEl.append(h('p.muted', null, '(no answer)'));
    }
  }

  text() {
    return this.parts.filter((p) => p.kind === 'md').map((p) => textOf(parseMarkdown(p.text))).join('\n\n');
  }

  /** fromStored rebuilds an answer from a stored message (reopened conversation). */
  static fromStored(msg, ctx) {
    const v = new AssistantView(ctx);
    v.setWaiting(false);
    // Stored with the answer since the server kept them; older answers fall
    // back to what their search_documents calls returned.
    if (Array.isArray(msg.sources)) v.sources = msg.sources;
    if (Array.isArray(msg.number_checks) && msg.number_checks.length) v.numberChecks = msg.number_checks;
    const calls = msg.tool_calls || [];
    const addCard = (tc) => {
      if (tc.tool === 'search_documents') for (const [n, s] of parseSourcesText(tc.result)) v.sourceMap.set(n, s);
      const card = createToolCard(tc.tool, tc.args, ctx);
      card.setStored(tc);
      v.cards.set(tc.call_id, card);
      v.parts.push({ kind: 'card', card });
      v.partsEl.append(card.el);
    };
    if (Array.isArray(msg.parts) && msg.parts.length) {
      // The answer's text and tool calls in the order they streamed.
      const byCall = new Map(calls.map((tc) => [tc.call_id, tc]));
      for (const part of msg.parts) {
        if (part.type === 'text') {
          const md = { kind: 'md', text: part.text || '', el: h('div.md') };
          v.parts.push(md);
          v.partsEl.append(md.el);
        } else if (part.type === 'tool_call') {
          const tc = byCall.get(part.call_id);
          if (tc) {
            addCard(tc);
            byCall.delete(part.call_id);
          }
        }
      }
      for (const tc of byCall.values()) addCard(tc); // a round stored without its part
    } else {
      // Answers stored before their parts were: cards, then the text.
      for (const tc of calls) addCard(tc);
      if (msg.content) v.lastMD().text = msg.content;
    }
    v.renderText();
    const status = msg.status || 'complete';
    if (status === 'awaiting_confirmation') v.awaiting();
    else v.setStatus(status);
    if (msg.error) {
      v.extra.append(errorBlock({ message: msg.error, reason: msg.error_reason, suggested_action: msg.error_suggested_action }));
    }
    v.setUsage(msg.input_tokens, msg.output_tokens);
    if (!msg.content && !(msg.tool_calls || []).length && status === 'complete') v.ensureNotEmpty();
    verifyAnswer(v, msg.id);
    return v;
  }
}
