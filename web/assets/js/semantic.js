// The semantic layer editor in the data panel: per table (each dataset, and
// the tables of attached databases), its metrics, synonyms and join keys —
// and, for a database's table, its description and its columns' (a
// dataset's are edited in the Datasets list) — added, changed and removed
// on the page, saved one table at a time (PATCH …/dictionary/tables), with
// the server's refusals shown beside the field they are about. A viewer of
// a shared conversation sees the same, read-only (showSharedLayer).

import { h, icon, clear, append } from './dom.js';
import { draftOf, newRow, changesOf, placeProblems, summary, tableKey, formatValue } from './semantic-model.js';

let uid = 0;
const nextUid = (p) => `${p}-${++uid}`;

/** TableEditor is one table's entry: a summary line that opens its form. */
class TableEditor {
  /**
   * @param {object} table a table of GET …/dictionary/tables
   * @param {object} o
   * @param {boolean} o.readOnly
   * @param {(t: object, change: object) => Promise<object>} [o.save] stores a change, returns the table saved
   * @param {() => string[]} o.others names of the tables a join may reach
   */
  constructor(table, { readOnly, save, others }) {
    this.base = table;
    this.draft = draftOf(table);
    this.readOnly = readOnly;
    this.save = save;
    this.others = others;
    this.values = {};
    this.dirty = false;
    this.errors = [];
    this.built = false;
    this.meta = h('span.item-meta.sem-meta');
    this.body = h('div.sem-body');
    this.details = h('details.sem-details', null,
      h('summary.sem-summary', null,
        h('span.item-icon', null, icon(table.kind === 'source' ? 'data' : 'table', 16)),
        h('span.sem-title', null,
          h('span.item-name', { title: this.title() }, this.title()),
          this.meta)),
      this.body);
    this.details.addEventListener('toggle', () => {
      if (this.details.open && !this.built) this.render();
    });
    this.el = h('li.item.sem-table', { testid: 'semantic-table', dataset: { name: table.name, kind: table.kind } }, this.details);
    this.updateMeta();
  }

  title() {
    return this.base.kind === 'source' ? `${this.base.source} · ${this.base.name}` : this.base.name;
  }

  /** descriptions: whether this form edits the descriptions (a database's table). */
  get descriptions() {
    return this.base.kind === 'source';
  }

  updateMeta() {
    const s = summary(this.base);
    this.meta.textContent = (this.dirty ? 'unsaved changes' : '') || s || (this.readOnly ? 'nothing defined' : 'no metrics yet');
    this.meta.classList.toggle('sem-dirty', this.dirty);
  }

  /** replace takes a newer copy of the table, unless the form holds unsaved changes. */
  replace(table) {
    if (this.dirty) return;
    this.base = table;
    this.draft = draftOf(table);
    this.updateMeta();
    if (this.built) this.render();
  }

  changed() {
    if (!this.dirty) {
      this.dirty = true;
      this.updateMeta();
    }
    if (this.saveBtn) this.saveBtn.disabled = false;
    if (this.cancelBtn) this.cancelBtn.hidden = false;
  }

  /** errorsOf are the problems of one row (or of the table: kind 'table'). */
  errorsOf(kind, id) {
    return this.errors.filter((e) => e.kind === kind && (id === undefined || e.id === id));
  }

  /** input builds a text field bound to obj[key], marked when a problem is about it. */
  input(obj, key, { kind, part, label, placeholder, testid, mono = false, multiline = false, list = null, caption = '' }) {
    const bad = this.errors.some((e) => e.kind === kind && e.id === obj.id && e.part === part);
    const el = h(multiline ? 'textarea.sem-input' : 'input.sem-input', {
      class: mono ? 'mono' : null, testid, placeholder, 'aria-label': label, spellcheck: mono ? 'false' : null,
      rows: multiline ? '2' : null, maxlength: part === 'sql' || part === 'filter' ? '4000' : '2000', list,
      'aria-invalid': bad ? 'true' : null, autocomplete: 'off', autocapitalize: mono ? 'off' : null,
    });
    el.value = obj[key] || '';
    el.addEventListener('input', () => {
      obj[key] = el.value;
      this.changed();
    });
    el.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
        e.preventDefault();
        this.store();
      }
    });
    return caption ? h('label.sem-field', null, h('span.sem-cap', { 'aria-hidden': 'true' }, caption), el) : el;
  }

  rowErrors(kind, id) {
    const errs = this.errorsOf(kind, id);
    if (!errs.length) return null;
    return h('div.sem-error', { role: 'alert', testid: 'field-error' }, errs.map((e) => h('div', null, icon('alert', 13), h('span', null, e.message))));
  }

  removeBtn(label, testid, onclick) {
    return h('button.icon-btn.small.remove', { type: 'button', testid, title: label, 'aria-label': label, onclick }, icon('trash', 14));
  }

  render() {
    this.built = true;
    const keepFocus = this.body.contains(document.activeElement) ? document.activeElement.dataset.testid : null;
    clear(this.body);
    if (this.readOnly) {
      this.renderReadOnly();
      return;
    }
    const tableErrors = this.errorsOf('table');
    if (tableErrors.length) this.body.append(this.rowErrors('table'));
    if (this.descriptions) this.renderDescriptions();
    else this.body.append(h('p.panel-hint.sem-hint', null, 'The table’s and its columns’ descriptions are edited in Datasets above.'));
    this.renderMetrics();
    this.renderSynonyms();
    this.renderJoins();
    this.saveBtn = h('button.btn.small.primary', { type: 'button', testid: 'semantic-save', title: 'Save this table (Ctrl+Enter)', disabled: !this.dirty, onclick: () => this.store() }, 'Save');
    this.cancelBtn = h('button.btn.small', { type: 'button', testid: 'semantic-cancel', hidden: !this.dirty, onclick: () => this.revert() }, 'Discard changes');
    this.status = h('span.sem-status', { role: 'status', testid: 'semantic-status' });
    this.body.append(h('div.sem-bar', null, this.saveBtn, this.cancelBtn, this.status));
    if (keepFocus) this.body.querySelector(`[data-testid="${keepFocus}"]`)?.focus();
  }

  renderDescriptions() {
    const wrap = h('div.sem-group');
    wrap.append(h('div.sem-label', null, 'Description'));
    wrap.append(this.input(this.draft, 'description', { kind: 'description', part: '', label: `Description of ${this.base.name}`, placeholder: 'What one row is, where the data comes from…', testid: 'semantic-description', multiline: true }));
    const err = this.errorsOf('description');
    if (err.length) wrap.append(h('div.sem-error', { role: 'alert', testid: 'field-error' }, err.map((e) => e.message).join(' ')));
    const cols = this.base.columns || [];
    if (cols.length) {
      const list = h('ul.sem-cols');
      for (const c of cols) {
        const input = h('input.sem-input', { testid: 'semantic-column', 'aria-label': `Description of column ${c.name}`, placeholder: 'describe…', maxlength: '2000', autocomplete: 'off' });
        input.value = this.draft.columns[c.name] || '';
        input.addEventListener('input', () => {
          this.draft.columns[c.name] = input.value;
          this.changed();
        });
        const errs = this.errorsOf('columns', c.name);
        if (errs.length) input.setAttribute('aria-invalid', 'true');
        list.append(h('li.sem-col', { dataset: { column: c.name } },
          h('div.col-row', null, h('span.col-name', null, c.name), c.type ? h('span.col-type', null, c.type) : null),
          input, this.rowErrors('columns', c.name)));
      }
      const open = cols.some((c) => this.errorsOf('columns', c.name).length);
      wrap.append(h('details.sem-coldetails', { open }, h('summary', null, `Column descriptions (${cols.length})`), list));
    }
    this.body.append(wrap);
  }

  group(title, hint, rows, addLabel, addTestid, kind) {
    const list = h('ul.sem-rows');
    append(list, rows);
    const add = h('button.link-btn.sem-add', { type: 'button', testid: addTestid, onclick: () => {
      this.draft[kind].push(newRow(kind));
      this.changed();
      this.render();
      const rowsNow = this.body.querySelectorAll(`[data-kind="${kind}"]`);
      rowsNow[rowsNow.length - 1]?.querySelector('input')?.focus();
    } }, icon('plus', 13), addLabel);
    return h('div.sem-group', null, h('div.sem-label', null, title), h('p.sem-hint', null, hint), list, add);
  }

  renderMetrics() {
    const rows = this.draft.metrics.map((m) => {
      const value = this.values[m.name.trim()];
      return h('li.sem-row', { testid: 'metric-row', dataset: { kind: 'metrics', id: m.id } },
        h('div.sem-row-head', null,
          this.input(m, 'name', { kind: 'metrics', part: 'name', label: 'Metric name', placeholder: 'e.g. revenue', testid: 'metric-name', caption: 'Name' }),
          this.removeBtn(`Remove metric ${m.name || ''}`.trim(), 'metric-remove', () => {
            this.draft.metrics = this.draft.metrics.filter((x) => x !== m);
            this.changed();
            this.render();
          })),
        this.input(m, 'sql', { kind: 'metrics', part: 'sql', label: `SQL expression of ${m.name || 'the metric'}`, placeholder: 'e.g. sum(amount)', testid: 'metric-sql', mono: true, caption: 'SQL' }),
        this.input(m, 'filter', { kind: 'metrics', part: 'filter', label: `Rows ${m.name || 'the metric'} counts (optional condition)`, placeholder: 'optional: status = \'paid\'', testid: 'metric-filter', mono: true, caption: 'Where' }),
        this.input(m, 'description', { kind: 'metrics', part: 'description', label: `What ${m.name || 'the metric'} means`, placeholder: 'optional: what it means', testid: 'metric-description', caption: 'About' }),
        value !== undefined ? h('div.sem-value', { testid: 'metric-value' }, `= ${formatValue(value)} now`) : null,
        this.rowErrors('metrics', m.id));
    });
    this.body.append(this.group('Metrics', 'An aggregate over this table, computed exactly as written.', rows, 'Add a metric', 'semantic-add-metric', 'metrics'));
  }

  renderSynonyms() {
    const rows = this.draft.synonyms.map((s) => h('li.sem-row', { testid: 'synonym-row', dataset: { kind: 'synonyms', id: s.id } },
      h('div.sem-row-head', null,
        this.input(s, 'term', { kind: 'synonyms', part: 'term', label: 'Synonym: the word the user may use', placeholder: 'e.g. EMEA', testid: 'synonym-term', caption: 'Word' }),
        this.removeBtn(`Remove synonym ${s.term || ''}`.trim(), 'synonym-remove', () => {
          this.draft.synonyms = this.draft.synonyms.filter((x) => x !== s);
          this.changed();
          this.render();
        })),
      this.input(s, 'meaning', { kind: 'synonyms', part: 'meaning', label: `What ${s.term || 'the word'} means`, placeholder: 'a column, a metric or region IN (\'DE\')', testid: 'synonym-meaning', mono: true, caption: 'Means' }),
      this.rowErrors('synonyms', s.id)));
    this.body.append(this.group('Synonyms', 'A word people use and what it means in this table.', rows, 'Add a synonym', 'semantic-add-synonym', 'synonyms'));
  }

  renderJoins() {
    const listId = nextUid('sem-tables');
    const colsId = nextUid('sem-cols');
    const rows = this.draft.relationships.map((r) => h('li.sem-row', { testid: 'join-row', dataset: { kind: 'relationships', id: r.id } },
      h('div.sem-row-head', null,
        this.input(r, 'columns', { kind: 'relationships', part: 'columns', label: `Column(s) of ${this.base.name} that join`, placeholder: 'column(s) of this table', testid: 'join-columns', mono: true, list: colsId, caption: 'Column' }),
        this.removeBtn('Remove this join', 'join-remove', () => {
          this.draft.relationships = this.draft.relationships.filter((x) => x !== r);
          this.changed();
          this.render();
        })),
      this.input(r, 'ref_table', { kind: 'relationships', part: 'ref_table', label: 'The table it joins to', placeholder: 'table', testid: 'join-ref-table', mono: true, list: listId, caption: '→ Table' }),
      this.input(r, 'ref_columns', { kind: 'relationships', part: 'ref_columns', label: 'Its column(s)', placeholder: 'its column(s)', testid: 'join-ref-columns', mono: true, caption: 'Column' }),
      this.rowErrors('relationships', r.id)));
    const fks = (this.base.foreign_keys || []).map((fk) => h('li.sem-fk', null, `${fk.columns.join(', ')} → ${fk.ref_table}.${fk.ref_columns.join(', ')} (from the database)`));
    const g = this.group('Joins', 'Columns that join this table to another of the same place.', rows, 'Add a join', 'semantic-add-join', 'relationships');
    if (fks.length) g.insertBefore(h('ul.sem-fks', null, fks), g.querySelector('.sem-rows'));
    g.append(h('datalist', { id: listId }, this.others().map((n) => h('option', { value: n }))),
      h('datalist', { id: colsId }, (this.base.columns || []).map((c) => h('option', { value: c.name }))));
    this.body.append(g);
  }

  renderReadOnly() {
    const t = this.base;
    const dl = h('dl.sem-ro');
    const add = (term, items) => {
      if (!items.length) return;
      dl.append(h('dt', null, term), ...items.map((i) => h('dd', null, i)));
    };
    if (this.descriptions) {
      add('Description', t.description ? [t.description] : []);
      add('Columns', (t.columns || []).filter((c) => c.description).map((c) => [h('code', null, c.name), ` — ${c.description}`]));
    }
    add('Metrics', Object.entries(t.metrics || {}).sort(([a], [b]) => a.localeCompare(b)).map(([name, m]) => h('span', { testid: 'metric-readonly' },
      h('strong', null, name), ' = ', h('code', null, m.sql), m.filter ? [' where ', h('code', null, m.filter)] : null, m.description ? ` — ${m.description}` : null)));
    add('Synonyms', Object.entries(t.synonyms || {}).sort(([a], [b]) => a.localeCompare(b)).map(([term, meaning]) => h('span', { testid: 'synonym-readonly' },
      h('strong', null, `“${term}”`), ' means ', h('code', null, meaning))));
    add('Joins', (t.relationships || []).map((r) => h('code', null, `${r.columns.join(', ')} → ${r.ref_table}.${r.ref_columns.join(', ')}`)));
    if (!dl.childNodes.length) dl.append(h('dd.muted', null, 'Nothing defined for this table.'));
    this.body.append(dl);
  }

  revert() {
    this.draft = draftOf(this.base);
    this.errors = [];
    this.dirty = false;
    this.updateMeta();
    this.render();
  }

  setStatus(text, kind = '') {
    if (!this.status) return;
    this.status.textContent = text;
    this.status.className = `sem-status ${kind}`;
  }

  async store() {
    const { change, problems, relIds } = changesOf(this.base, this.draft, this.descriptions);
    this.errors = problems;
    if (problems.length) {
      this.render();
      this.setStatus('Not saved: see the fields marked above.', 'error');
      this.focusFirstError();
      return;
    }
    if (!change) {
      this.dirty = false;
      this.updateMeta();
      this.render();
      this.setStatus('Nothing to save: it is as stored.', 'ok');
      return;
    }
    this.saveBtn.disabled = true;
    this.setStatus('Saving… (each new metric is run once to check it)', 'busy');
    try {
      const saved = await this.save(this.base, change);
      this.values = saved.values || {};
      this.base = saved;
      this.draft = draftOf(saved);
      this.dirty = false;
      this.errors = [];
      this.updateMeta();
      this.render();
      this.setStatus('Saved: the assistant uses it from the next question.', 'ok');
    } catch (err) {
      this.errors = placeProblems(this.draft, err.problems, relIds);
      const placed = this.errors.some((e) => e.kind !== 'table');
      this.render();
      this.setStatus(placed ? 'Not saved: see the fields marked above.' : (err.message || 'Not saved.'), 'error');
      this.focusFirstError();
    }
  }

  focusFirstError() {
    const bad = this.body.querySelector('[aria-invalid="true"]');
    if (bad) bad.focus();
  }
}

/**
 * SemanticSection is the data panel's "Metrics & synonyms" section: the
 * open conversation's tables, each with its editor.
 */
export class SemanticSection {
  /**
   * @param {object} o
   * @param {() => import('./api.js').Api} o.api returns the signed-in API client
   * @param {HTMLElement} [o.after] the panel section to put it after
   */
  constructor({ api, after }) {
    this.getApi = api;
    this.convId = null;
    this.gen = 0;
    this.editors = new Map();
    this.shownSources = new Set(); // source tables opened from the picker
    this.datasetIds = '';
    this.list = h('ul.item-list.sem-list');
    this.status = h('div.panel-status', { 'aria-live': 'polite' });
    this.pickers = h('div.sem-pickers');
    this.section = h('section.panel-section.sem-section', { testid: 'semantic-section', hidden: true },
      h('h3', null, 'Metrics, synonyms & joins'),
      h('p.panel-hint', null, 'The semantic layer, per table: the assistant computes each metric exactly as defined, understands the synonyms, and joins on the keys given.'),
      this.status, this.list, this.pickers);
    if (after) after.after(this.section);
  }

  get api() {
    return this.getApi();
  }

  base() {
    return `/api/conversations/${encodeURIComponent(this.convId)}/dictionary/tables`;
  }

  /** load shows a conversation's tables (null: none open). */
  async load(convId) {
    const gen = ++this.gen;
    if (convId !== this.convId) {
      this.editors = new Map();
      this.shownSources = new Set();
    }
    this.convId = convId;
    this.datasetIds = null; // unknown until loaded: sync waits
    if (!convId) {
      this.tables = [];
      this.render();
      return;
    }
    try {
      const res = await this.api.get(this.base());
      if (gen !== this.gen) return;
      this.tables = Array.isArray(res && res.tables) ? res.tables : [];
      this.unavailable = Array.isArray(res && res.unavailable) ? res.unavailable : [];
      this.datasetIds = this.tables.filter((t) => t.kind === 'dataset').map((t) => t.dataset_id).join(',');
      this.setStatus('');
    } catch (err) {
      if (gen !== this.gen) return;
      this.tables = [];
      this.unavailable = [];
      this.setStatus(err.message, 'error');
    }
    this.render();
  }

  /** sync reloads the tables when the panel's datasets are not those shown. */
  sync(datasets) {
    const ids = (datasets || []).map((d) => d.id).join(',');
    if (this.convId && this.datasetIds !== null && ids !== this.datasetIds) {
      this.datasetIds = ids;
      this.load(this.convId);
    }
  }

  setStatus(text, kind = '') {
    clear(this.status);
    this.status.className = `panel-status ${kind}`;
    if (text) append(this.status, [kind === 'error' ? icon('alert', 15) : null, h('span', null, text)]);
  }

  async save(t, change) {
    const target = t.kind === 'source' ? { source: t.source, table: t.name } : { dataset_id: t.dataset_id };
    return this.api.patch(this.base(), { ...target, ...change });
  }

  /** others are the names a join of t may reach: the tables of the same place. */
  others(t) {
    return (this.tables || []).filter((o) => o.kind === t.kind && (t.kind === 'dataset' || o.source === t.source)).map((o) => o.name);
  }

  shown(t) {
    if (t.kind === 'dataset') return true;
    const key = tableKey(t);
    return this.shownSources.has(key) || !!summary(t) || !!t.description || (t.columns || []).some((c) => c.description) || this.editors.get(key)?.dirty;
  }

  render() {
    clear(this.list);
    clear(this.pickers);
    const tables = this.tables || [];
    this.section.hidden = !this.convId;
    const keep = new Map();
    for (const t of tables) {
      const key = tableKey(t);
      let ed = this.editors.get(key);
      if (ed) ed.replace(t);
      else ed = new TableEditor(t, { readOnly: false, save: (tb, change) => this.save(tb, change), others: () => this.others(ed.base) });
      keep.set(key, ed);
      if (this.shown(t)) this.list.append(ed.el);
    }
    this.editors = keep;
    if (!tables.length && this.convId) this.list.append(h('li.empty-item', null, 'No tables yet. Add a dataset or attach a database to define metrics and synonyms.'));
    // A database's tables may be hundreds: one is opened by name.
    const bySource = new Map();
    for (const t of tables) {
      if (t.kind !== 'source' || this.shown(t)) continue;
      if (!bySource.has(t.source)) bySource.set(t.source, []);
      bySource.get(t.source).push(t);
    }
    for (const [source, list] of bySource) {
      const id = nextUid('sem-pick');
      const input = h('input.sem-input.mono', { id: `${id}-in`, list: id, testid: 'semantic-pick-table', placeholder: `a table of ${source}`, 'aria-label': `A table of ${source} to describe`, autocomplete: 'off' });
      const note = h('span.sem-status', { role: 'status' });
      const open = () => {
        const name = input.value.trim();
        const t = list.find((x) => x.name === name) || list.find((x) => x.name.toLowerCase() === name.toLowerCase());
        if (!t) {
          note.textContent = name ? `${source} has no table ${name} that this conversation may read.` : 'Type or choose a table.';
          note.className = 'sem-status error';
          return;
        }
        this.shownSources.add(tableKey(t));
        this.render();
        const ed = this.editors.get(tableKey(t));
        ed.details.open = true;
        ed.details.scrollIntoView({ block: 'nearest' });
      };
      input.addEventListener('keydown', (e) => {
        if (e.key === 'Enter') {
          e.preventDefault();
          open();
        }
      });
      this.pickers.append(h('div.sem-pick', null,
        h('label.sem-label', { for: `${id}-in` }, `Describe a table of ${source}`),
        h('div.sem-pick-row', null, input, h('button.btn.small', { type: 'button', testid: 'semantic-pick', onclick: open }, 'Open')),
        note,
        h('datalist', { id }, list.map((t) => h('option', { value: t.name })))));
    }
    for (const u of this.unavailable || []) {
      this.pickers.append(h('p.panel-status.error', null, icon('alert', 15), h('span', null, `${u.name} cannot be read now (${u.reason}); its tables are shown as stored and cannot be saved until it answers.`)));
    }
  }
}

/**
 * showSharedLayer shows, under a shared conversation's read-only bar, the
 * semantic layer its owner defined, read-only (nothing when there is none).
 * @param {import('./api.js').Api} api
 * @param {string} id the shared conversation's id
 */
export async function showSharedLayer(api, id) {
  const bar = document.getElementById('readonly-bar');
  if (!bar) return;
  bar.querySelectorAll('.sem-shared').forEach((e) => e.remove());
  const token = nextUid('shared');
  bar.dataset.semantic = token;
  let res;
  try {
    res = await api.get(`/api/shared/${encodeURIComponent(id)}/dictionary/tables`);
  } catch {
    return; // the view says why the conversation cannot be read
  }
  if (bar.dataset.semantic !== token) return;
  const tables = (Array.isArray(res && res.tables) ? res.tables : []).filter((t) => summary(t) || (t.kind === 'source' && t.description));
  if (!tables.length) return;
  const list = h('ul.item-list.sem-list');
  for (const t of tables) {
    const ed = new TableEditor(t, { readOnly: true, others: () => [] });
    list.append(ed.el);
  }
  const text = bar.querySelector('.readonly-text') || bar;
  text.append(h('details.sem-shared', { testid: 'semantic-shared' },
    h('summary', null, `Metrics, synonyms & joins of ${tables.length} table${tables.length === 1 ? '' : 's'} (read-only)`), list));
}
