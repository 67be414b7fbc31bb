// The confirmation dialog: the model asks before running an action;
// the user approves or declines, with an optional note.

import { h, clear, formatCount } from './dom.js';
import { highlightedSQL } from './cards.js';

const ACTION_LABELS = {
  execute_sql: 'Run an SQL query',
  load_dataset: 'Load a dataset from a URL',
};

function parseParams(p) {
  if (p && typeof p === 'object') return p;
  if (typeof p === 'string') {
    try {
      const v = JSON.parse(p);
      return v && typeof v === 'object' ? v : { value: p };
    } catch {
      return { value: p };
    }
  }
  return {};
}

export class ConfirmDialog {
  /** @param {(id: string, approved: boolean, note: string) => void} onAnswer */
  constructor(onAnswer) {
    this.onAnswer = onAnswer;
    this.dlg = document.getElementById('confirm-dialog');
    this.body = document.getElementById('confirm-body');
    this.note = document.getElementById('confirm-note');
    this.current = null;
    document.getElementById('confirm-approve').addEventListener('click', () => this.answer(true));
    document.getElementById('confirm-decline').addEventListener('click', () => this.answer(false));
    this.dlg.addEventListener('close', () => {
      // Esc closes the dialog without answering; the message keeps a Review button.
    });
  }

  get isOpen() {
    return this.dlg.open;
  }

  /** show opens the dialog for a confirmation {id, action, parameters, explanation}. */
  show(c) {
    const same = this.current && this.current.id === c.id;
    this.current = c;
    if (!same) this.note.value = '';
    const params = parseParams(c.parameters);
    clear(this.body);
    this.body.append(
      h('p.confirm-expl', null, String(c.explanation || 'The assistant wants to run this action.')),
      h('div.confirm-action', null, h('span.label', null, 'Action'), h('span.value', null, ACTION_LABELS[c.action] || String(c.action || '')), h('code.action-name', null, String(c.action || ''))));
    const rest = { ...params };
    if (typeof params.query === 'string') {
      // The whole query, wrapped and highlighted; a long one scrolls in its box.
      const lines = params.query.trim().split('\n').length;
      this.body.append(h('pre.sql.confirm-sql', { testid: 'confirm-sql', tabindex: '0', 'aria-label': 'The query to approve' }, highlightedSQL(params.query)));
      if (lines > 12) this.body.append(h('p.confirm-sql-note', null, `${formatCount(lines)} lines: scroll to read it all.`));
      delete rest.query;
    }
    if (params.estimated_rows !== undefined && params.estimated_rows !== null) {
      this.body.append(h('div.confirm-action', null, h('span.label', null, 'Estimated rows'), h('span.value.strong', null, formatCount(params.estimated_rows))));
      delete rest.estimated_rows;
    }
    const keys = Object.keys(rest);
    if (keys.length) {
      this.body.append(h('dl.confirm-params', null, keys.flatMap((k) => [
        h('dt', null, k),
        h('dd', null, typeof rest[k] === 'object' ? JSON.stringify(rest[k]) : String(rest[k])),
      ])));
    }
    if (!this.dlg.open) this.dlg.showModal();
    document.getElementById('confirm-approve').focus();
  }

  answer(approved) {
    if (!this.current) return;
    const c = this.current;
    this.current = null;
    this.dlg.close();
    this.onAnswer(c.id, approved, this.note.value.trim());
  }

  /** dismiss closes the dialog when the confirmation is no longer pending. */
  dismiss() {
    this.current = null;
    if (this.dlg.open) this.dlg.close();
  }

  reopen() {
    if (this.current && !this.dlg.open) this.show(this.current);
  }
}
