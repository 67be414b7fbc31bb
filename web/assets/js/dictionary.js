// The data dictionary in the data panel: descriptions of datasets and
// columns edited in place (click to edit), the conversation's notes (its
// business rules), and the list of the user's verified examples.

import { h, icon, clear } from './dom.js';

export { SemanticSection, showSharedLayer } from './semantic.js';

/**
 * editableText shows a text that turns into an input when clicked: Enter (or
 * leaving the field) saves, Escape cancels; Shift+Enter is a new line where
 * multiline. onSave(text) returns a promise of the text saved.
 * @param {object} o
 * @param {string} o.value
 * @param {string} o.placeholder shown when empty
 * @param {string} o.label for screen readers
 * @param {string} o.testid
 * @param {boolean} [o.multiline]
 * @param {(text: string) => Promise<string>} o.onSave
 */
export function editableText({ value, placeholder, label, testid, multiline = false, onSave }) {
  let current = value || '';
  const view = h('button.desc', { type: 'button', testid, title: `${label}: click to edit`, 'aria-label': `${label}: ${current || 'none'}, click to edit` });
  const wrap = h('div.desc-wrap', null, view);
  const show = () => {
    clear(view);
    view.classList.toggle('empty', !current);
    view.append(current || placeholder);
    view.setAttribute('aria-label', `${label}: ${current || 'none'}, click to edit`);
  };
  show();
  view.addEventListener('click', (e) => {
    e.preventDefault();
    e.stopPropagation();
    const input = h(multiline ? 'textarea.desc-input' : 'input.desc-input', { testid: 'description-input', 'aria-label': label, rows: multiline ? '3' : null, maxlength: '2000' });
    input.value = current;
    const status = h('div.desc-status', { role: 'status' });
    let done = false;
    const finish = () => {
      done = true;
      input.remove();
      status.remove();
      view.hidden = false;
      show();
    };
    const save = async () => {
      if (done) return;
      const text = input.value.trim();
      if (text === current) {
        finish();
        return;
      }
      input.disabled = true;
      status.textContent = 'Saving…';
      try {
        current = await onSave(text);
        finish();
      } catch (err) {
        input.disabled = false;
        status.textContent = err.message || 'Not saved.';
        status.classList.add('error');
        input.focus();
      }
    };
    input.addEventListener('keydown', (ev) => {
      if (ev.key === 'Escape') {
        ev.preventDefault();
        ev.stopPropagation();
        finish();
      } else if (ev.key === 'Enter' && !(multiline && ev.shiftKey)) {
        ev.preventDefault();
        save();
      }
    });
    input.addEventListener('blur', () => { if (!input.disabled) save(); });
    // In a <summary>, a click or a space would toggle the <details>.
    input.addEventListener('click', (ev) => ev.stopPropagation());
    input.addEventListener('keyup', (ev) => ev.preventDefault());
    view.hidden = true;
    wrap.append(input, status);
    input.focus();
  });
  return wrap;
}

/**
 * NotesBox edits the open conversation's notes: the business rules the
 * model is given with the schema.
 */
export class NotesBox {
  /**
   * @param {HTMLElement} root the section to fill
   * @param {(notes: string) => Promise<string>} save stores the notes, returns them as stored
   */
  constructor(root, save) {
    this.save = save;
    this.saved = '';
    this.input = h('textarea.notes-input', {
      testid: 'notes-input', rows: '4', maxlength: '20000', 'aria-label': 'Notes: business rules for this conversation',
      placeholder: 'Business rules the assistant should follow, e.g. “The fiscal year starts in April. Revenue excludes refunds.”',
    });
    this.button = h('button.btn.small', { type: 'button', testid: 'notes-save', disabled: true, onclick: () => this.store() }, 'Save notes');
    this.status = h('span.notes-status', { role: 'status' });
    this.input.addEventListener('input', () => {
      this.button.disabled = this.input.value.trim() === this.saved;
      this.setStatus('');
    });
    this.input.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
        e.preventDefault();
        this.store();
      }
    });
    clear(root).append(this.input, h('div.notes-bar', null, this.button, this.status));
  }

  /** set shows a conversation's notes (null: none open). */
  set(notes, enabled = true) {
    this.saved = (notes || '').trim();
    this.input.value = this.saved;
    this.input.disabled = !enabled;
    this.button.disabled = true;
    this.setStatus('');
  }

  setStatus(text, kind = '') {
    this.status.textContent = text;
    this.status.className = `notes-status ${kind}`;
  }

  async store() {
    const text = this.input.value.trim();
    this.button.disabled = true;
    this.setStatus('Saving…');
    try {
      this.saved = await this.save(text);
      this.input.value = this.saved;
      this.setStatus('Saved: the assistant follows them from the next question.', 'ok');
    } catch (err) {
      this.button.disabled = false;
      this.setStatus(err.message || 'Not saved.', 'error');
    }
  }
}

/**
 * renderExamples fills list with the user's verified examples, each with a
 * button that deletes it.
 * @param {HTMLElement} list
 * @param {object[]} examples
 * @param {(ex: object) => Promise<void>} remove
 */
export function renderExamples(list, examples, remove) {
  clear(list);
  const shown = examples.filter((e) => e.verdict === 'correct');
  if (!shown.length) {
    list.append(h('li.empty-item', null, 'No verified examples yet. Mark an answer’s SQL as correct to teach the assistant how you query your data.'));
    return;
  }
  for (const ex of shown) {
    const tables = (ex.tables || []).map((t) => t.name).join(', ');
    const li = h('li.item.example-item', { testid: 'example-item', dataset: { id: ex.id } },
      h('div.item-head', null,
        h('span.item-icon', null, icon('check', 16)),
        h('div.item-main', null,
          h('div.example-question', { title: ex.question }, ex.question),
          h('div.item-meta', null, tables ? `Reads ${tables}` : '')),
        h('button.icon-btn.small.remove', {
          type: 'button', testid: 'example-delete', title: 'Delete this example', 'aria-label': `Delete the example “${ex.question}”`,
          onclick: async () => {
            li.classList.add('removing');
            try {
              await remove(ex);
            } catch {
              li.classList.remove('removing');
            }
          },
        }, icon('trash', 15))),
      h('pre.example-sql', null, ex.sql));
    list.append(li);
  }
}
