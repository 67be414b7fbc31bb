// The data panel: a conversation's datasets and documents, added by URL,
// file picker or drag and drop, with upload progress. Which files go where
// is the server's list (GET /api/formats, formats.js).

import { h, icon, clear, append, formatBytes, formatCount } from './dom.js';
import { listOf } from './api.js';
import { editableText, NotesBox, renderExamples, SemanticSection } from './dictionary.js';
import { SourcesSection } from './sources.js';
import { kindOfFile, acceptList, formatNames } from './formats.js';

/** withName prefixes a message with the file's name unless it names the file already. */
export function withName(name, message) {
  const m = String(message || '');
  return m.includes(name) ? m : `${name}: ${m}`;
}

/** tableList names tables for a status line: "a", "a and b", "a, b and c". */
function tableList(names) {
  if (names.length < 2) return names.join('');
  return `${names.slice(0, -1).join(', ')} and ${names[names.length - 1]}`;
}

export class DataPanel {
  /**
   * @param {object} o
   * @param {() => import('./api.js').Api} o.api returns the signed-in API client
   * @param {() => Promise<string>} o.ensureConversation returns the open conversation's id, creating one if needed
   * @param {(counts: {datasets: number, documents: number, sources: number}) => void} o.onChange
   * @param {import('./verify.js').Examples} [o.examples] the user's verified examples, listed here
   */
  constructor({ api, ensureConversation, onChange, examples }) {
    this.getApi = api;
    this.ensureConversation = ensureConversation;
    this.onChange = onChange;
    this.convId = null;
    this.datasets = [];
    this.documents = [];
    this.gen = 0;

    this.dsList = document.getElementById('dataset-list');
    this.docList = document.getElementById('document-list');
    this.dsStatus = document.getElementById('dataset-status');
    this.docStatus = document.getElementById('document-status');
    this.urlForm = document.getElementById('dataset-url-form');
    this.urlInput = document.getElementById('dataset-url');
    this.notes = new NotesBox(document.getElementById('notes-box'), (notes) => this.saveNotes(notes));
    this.dictStatus = document.getElementById('dictionary-status');
    const dictInput = document.getElementById('dictionary-upload');
    dictInput.addEventListener('change', () => {
      const file = dictInput.files[0];
      dictInput.value = '';
      if (file) this.importDictionary(file);
    });
    if (examples) {
      const list = document.getElementById('example-list');
      const show = () => renderExamples(list, examples.list, (ex) => examples.remove(ex));
      examples.subscribe(show);
      show();
    }
    this.sources = new SourcesSection({ api, ensureConversation, onChange: () => this.counted() });
    /** @type {import('./formats.js').Formats|null} the server's list, once it came */
    this.formats = null;
    this.formatsReady = this.loadFormats();
    // Metrics, synonyms, joins (semantic.js): below the datasets and the Databases section, whose tables it describes too.
    this.semantic = new SemanticSection({ api, after: document.getElementById('source-section') });

    this.urlForm.addEventListener('submit', (e) => {
      e.preventDefault();
      this.addURL();
    });
    const dsInput = document.getElementById('dataset-upload');
    this.dsInput = dsInput;
    dsInput.addEventListener('change', () => {
      const files = [...dsInput.files];
      dsInput.value = '';
      this.uploadAll(files, 'dataset');
    });
    const docInput = document.getElementById('document-upload');
    this.docInput = docInput;
    docInput.addEventListener('change', () => {
      const files = [...docInput.files];
      docInput.value = '';
      this.uploadAll(files, 'document');
    });
    for (const [zone, kind] of [[document.getElementById('dataset-drop'), 'dataset'], [document.getElementById('document-drop'), 'document']]) {
      zone.addEventListener('dragover', (e) => {
        e.preventDefault();
        e.stopPropagation();
        zone.classList.add('over');
      });
      zone.addEventListener('dragleave', () => zone.classList.remove('over'));
      zone.addEventListener('drop', (e) => {
        e.preventDefault();
        e.stopPropagation();
        zone.classList.remove('over');
        document.body.classList.remove('dragging');
        // A file of the other kind goes where it belongs; one the list does not name, where it was dropped.
        this.uploadAll([...(e.dataTransfer?.files || [])], null, kind);
      });
    }
  }

  get api() {
    return this.getApi();
  }

  /**
   * loadFormats asks the server which files it reads, then fills the
   * pickers' accept lists and the drop zones' words from its answer.
   */
  async loadFormats() {
    try {
      this.formats = await this.api.get('/api/formats');
    } catch {
      // An older server, or the network: the pickers take any file, the
      // server says what it refuses, and the next conversation opened asks again.
      this.formats = null;
      this.formatsFailed = true;
      return;
    }
    this.formatsFailed = false;
    this.dsInput.accept = acceptList('dataset', this.formats);
    this.docInput.accept = acceptList('document', this.formats);
    const ds = formatNames('dataset', this.formats);
    const docs = formatNames('document', this.formats);
    const say = (id, names) => {
      const span = document.querySelector(`#${id} > span`);
      if (span && names) {
        span.textContent = '';
        append(span, [`Drop ${names}, or `, h('u', null, 'browse')]);
      }
    };
    say('dataset-drop', ds);
    say('document-drop', docs);
    this.render();
  }

  /** load shows a conversation's data (null: none open). */
  async load(convId) {
    const gen = ++this.gen;
    this.convId = convId;
    this.datasets = [];
    this.documents = [];
    this.setStatus(this.dsStatus, '');
    this.setStatus(this.docStatus, '');
    this.notes.set('', !!convId);
    if (this.dictStatus) this.setStatus(this.dictStatus, '');
    this.render();
    this.sources.load(convId);
    if (this.formatsFailed) {
      this.formatsFailed = false;
      this.formatsReady = this.loadFormats();
    }
    this.semantic.load(convId);
    if (!convId) return;
    try {
      const [ds, docs, dict] = await Promise.all([
        this.api.get(`/api/conversations/${encodeURIComponent(convId)}/datasets`),
        this.api.get(`/api/conversations/${encodeURIComponent(convId)}/documents`),
        this.api.get(`/api/conversations/${encodeURIComponent(convId)}/dictionary`).catch(() => null),
      ]);
      if (gen !== this.gen) return;
      this.notes.set(dict && typeof dict.notes === 'string' ? dict.notes : '');
      this.datasets = listOf(ds, 'datasets');
      this.documents = listOf(docs, 'documents');
      this.render();
    } catch (err) {
      if (gen !== this.gen) return;
      this.setStatus(this.dsStatus, err.message, 'error');
    }
  }

  /** refresh reloads the lists of the open conversation (e.g. after load_dataset). */
  refresh() {
    if (this.convId) this.load(this.convId);
  }

  base() {
    return `/api/conversations/${encodeURIComponent(this.convId)}`;
  }

  /** saveNotes stores the open conversation's notes (creating it if needed). */
  async saveNotes(notes) {
    await this.ensureConversation();
    const conv = await this.api.patch(this.base(), { notes });
    return conv && typeof conv.notes === 'string' ? conv.notes : notes;
  }

  /** importDictionary applies a dictionary file to the open conversation. */
  async importDictionary(file) {
    this.setStatus(this.dictStatus, `Importing ${file.name}…`, 'busy');
    try {
      await this.ensureConversation();
      const res = await this.api.upload(`${this.base()}/dictionary`, file).promise;
      const described = (res.datasets || []).filter((d) => d.description || (d.columns || []).some((c) => c.description)).length;
      await this.load(this.convId);
      this.setStatus(this.dictStatus, `Imported ${file.name}: ${described} table${described === 1 ? '' : 's'} described.`, 'ok');
    } catch (err) {
      this.setStatus(this.dictStatus, err.message, 'error');
    }
  }

  /** describe stores a dataset's description or a column's; returns the text stored. */
  async describe(d, column, text) {
    const body = column === null ? { description: text } : { columns: { [column]: text } };
    const updated = await this.api.patch(`${this.base()}/datasets/${encodeURIComponent(d.id)}`, body);
    this.datasets = this.datasets.map((x) => (x.id === updated.id ? updated : x));
    if (column === null) return updated.description || '';
    const col = (updated.columns || []).find((c) => c.name === column);
    return (col && col.description) || '';
  }

  setStatus(el, text, kind = '') {
    clear(el);
    el.className = `panel-status ${kind}`;
    if (text) append(el, [kind === 'error' ? icon('alert', 15) : null, h('span', null, text)]);
  }

  async addURL() {
    const url = this.urlInput.value.trim();
    if (!url) {
      this.urlInput.focus();
      return;
    }
    // A link to a document: the server loads datasets by link, documents as files only.
    await this.formatsReady;
    let file = '';
    try {
      file = decodeURIComponent(new URL(url).pathname.split('/').pop() || '');
    } catch {
      file = '';
    }
    if (file && kindOfFile(file, this.formats) === 'document') {
      this.setStatus(this.dsStatus, `${file} is a document: documents are added as files. Download it, then drop it on Documents below.`, 'error');
      return;
    }
    const btn = this.urlForm.querySelector('button');
    btn.disabled = true;
    this.setStatus(this.dsStatus, 'Loading the dataset…', 'busy');
    try {
      await this.ensureConversation();
      const res = await this.api.post(`${this.base()}/datasets`, { url });
      this.urlInput.value = '';
      this.added(res);
    } catch (err) {
      this.setStatus(this.dsStatus, err.message, 'error');
    } finally {
      btn.disabled = false;
    }
  }

  /**
   * added shows the tables a dataset upload or URL made: every one (a
   * workbook gives one per sheet), at once.
   */
  added(res) {
    const made = Array.isArray(res && res.datasets) && res.datasets.length ? res.datasets : [res];
    const ids = new Set(made.map((d) => d.id));
    this.datasets = [...this.datasets.filter((d) => !ids.has(d.id)), ...made];
    const names = made.map((d) => String(d.name));
    this.setStatus(this.dsStatus, `Added ${names.length === 1 ? 'table' : `${names.length} tables:`} ${tableList(names)}.`, 'ok');
    this.render();
  }

  /**
   * uploadAll uploads files one after another. kind: where they go (a
   * picker's); null routes each by the server's list of formats, and a
   * file it does not name goes to fallback (the drop zone's), or is refused
   * saying what is read.
   */
  async uploadAll(files, kind, fallback = null) {
    await this.formatsReady;
    for (const f of files) {
      const k = kind || kindOfFile(f.name, this.formats) || fallback;
      if (!k) {
        const ds = formatNames('dataset', this.formats);
        const docs = formatNames('document', this.formats);
        this.setStatus(this.dsStatus, ds && docs
          ? `${f.name} is not a file datachat reads. Add a dataset (${ds}) or a document (${docs}).`
          : `${f.name}: drop it on Datasets or Documents in the data panel.`, 'error');
        continue;
      }
      await this.upload(f, k);
    }
  }

  async upload(file, kind) {
    const status = kind === 'dataset' ? this.dsStatus : this.docStatus;
    const bar = h('div.progress-bar');
    const label = h('span.progress-label', null, `Uploading ${file.name}…`);
    const pct = h('span.progress-pct', null, '0%');
    const cancel = h('button.icon-btn.small', { type: 'button', title: 'Cancel upload', 'aria-label': 'Cancel upload' }, icon('close', 14));
    const prog = h('div.progress', { role: 'progressbar', 'aria-valuemin': '0', 'aria-valuemax': '100', 'aria-valuenow': '0', 'aria-label': `Uploading ${file.name}` },
      h('div.progress-top', null, label, pct, cancel), h('div.progress-track', null, bar));
    clear(status);
    status.className = 'panel-status';
    status.append(prog);
    try {
      await this.ensureConversation();
      const up = this.api.upload(`${this.base()}/${kind === 'dataset' ? 'datasets' : 'documents'}`, file, (sent, total) => {
        const p = total ? Math.min(100, Math.round((sent / total) * 100)) : 0;
        bar.style.width = `${p}%`;
        pct.textContent = `${p}%`;
        prog.setAttribute('aria-valuenow', String(p));
        if (p >= 100) {
          label.textContent = kind === 'dataset' ? `Reading ${file.name}…` : `Indexing ${file.name}…`;
          prog.classList.add('processing');
        }
      });
      cancel.addEventListener('click', () => up.abort());
      const item = await up.promise;
      if (kind === 'dataset') {
        this.added(item);
      } else {
        this.documents = [...this.documents.filter((d) => d.id !== item.id), item];
        this.setStatus(status, `Added ${item.name}.`, 'ok');
      }
      this.render();
    } catch (err) {
      this.setStatus(status, withName(file.name, err.message), 'error');
    }
  }

  async remove(kind, item, li) {
    li.classList.add('removing');
    const status = kind === 'dataset' ? this.dsStatus : this.docStatus;
    try {
      await this.api.del(`${this.base()}/${kind === 'dataset' ? 'datasets' : 'documents'}/${encodeURIComponent(item.id)}`);
      if (kind === 'dataset') this.datasets = this.datasets.filter((d) => d.id !== item.id);
      else this.documents = this.documents.filter((d) => d.id !== item.id);
      this.setStatus(status, `Removed ${item.name}.`, 'ok');
      this.render();
    } catch (err) {
      li.classList.remove('removing');
      this.setStatus(status, err.message, 'error');
    }
  }

  render() {
    clear(this.dsList);
    clear(this.docList);
    const none = !this.convId;
    document.getElementById('datapanel').classList.toggle('no-conv', none);
    const dsNames = formatNames('dataset', this.formats);
    const docNames = formatNames('document', this.formats);
    if (!this.datasets.length) this.dsList.append(h('li.empty-item', null, `No datasets yet. Add ${dsNames ? `a file (${dsNames})` : 'a data file'}, or ask with a link to one.`));
    for (const d of this.datasets) {
      const cols = d.columns || [];
      const li = h('li.item.dataset-item', { testid: 'dataset-item', dataset: { id: d.id, name: d.name } });
      append(li, [
        h('div.item-head', null,
          h('span.item-icon', null, icon('table', 16)),
          h('div.item-main', null,
            h('div.item-name', { title: d.name }, d.name),
            h('div.item-meta', null, [
              `${formatCount(d.row_count)} rows`,
              `${cols.length} column${cols.length === 1 ? '' : 's'}`,
              d.bytes ? formatBytes(d.bytes) : null,
            ].filter(Boolean).join(' · '))),
          h('button.icon-btn.small.remove', { type: 'button', title: `Remove ${d.name}`, 'aria-label': `Remove dataset ${d.name}`, onclick: () => this.remove('dataset', d, li) }, icon('trash', 15))),
        d.source && d.source !== d.name ? h('div.item-source', { title: d.source }, d.source) : null,
        editableText({
          value: d.description, placeholder: 'Describe this table…', label: `Description of ${d.name}`,
          testid: 'dataset-description', multiline: true, onSave: (text) => this.describe(d, null, text),
        }),
        h('details.columns', null,
          h('summary', null, 'Columns'),
          h('ul.col-list', null, cols.map((c) => h('li.col-item', { dataset: { column: c.name } },
            h('div.col-row', null, h('span.col-name', null, c.name), h('span.col-type', { title: c.sql_type || '' }, c.type)),
            editableText({
              value: c.description, placeholder: 'describe…', label: `Description of column ${c.name}`,
              testid: 'column-description', onSave: (text) => this.describe(d, c.name, text),
            }))))),
      ]);
      this.dsList.append(li);
    }
    if (!this.documents.length) this.docList.append(h('li.empty-item', null, `No documents yet. Add ${docNames || 'documents'} to cite.`));
    for (const d of this.documents) {
      const li = h('li.item.document-item', { testid: 'document-item', dataset: { id: d.id } });
      li.append(h('div.item-head', null,
        h('span.item-icon', null, icon('file', 16)),
        h('div.item-main', null,
          h('div.item-name', { title: d.name }, d.name),
          h('div.item-meta', null, [
            d.pages ? `${formatCount(d.pages)} page${d.pages === 1 ? '' : 's'}` : null,
            d.chunks !== undefined ? `${formatCount(d.chunks)} excerpt${d.chunks === 1 ? '' : 's'}` : null,
            d.bytes ? formatBytes(d.bytes) : null,
          ].filter(Boolean).join(' · '))),
        h('button.icon-btn.small.remove', { type: 'button', title: `Remove ${d.name}`, 'aria-label': `Remove document ${d.name}`, onclick: () => this.remove('document', d, li) }, icon('trash', 15))));
      this.docList.append(li);
    }
    this.semantic.sync(this.datasets);
    this.counted();
  }

  /** counted tells the page how much data the conversation has: datasets, documents and attached databases. */
  counted() {
    this.onChange({ datasets: this.datasets.length, documents: this.documents.length, sources: this.convId ? this.sources.attached.size : 0 });
  }
}
