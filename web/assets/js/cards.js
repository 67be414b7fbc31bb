// Tool cards shown inline in an assistant message: execute_sql (SQL, result
// table, chart, CSV), load_dataset and search_documents (compact), and any
// other tool (generic).

import { h, icon, clear, append, downloadText, formatCount, formatMS } from './dom.js';
import { tokenizeSQL, displaySQL } from './sqlhl.js';
import { formatCell, sortRows, nextSort, toCSV, resultFileName, isNumericType, storedResult, parseSourcesText } from './table.js';
import { pickChart, kindsFor, whyNoChart } from './chartpick.js';
import { drawChart } from './charts.js';
import { toXLSX, XLSX_TYPE } from './xlsx.js';

const MAX_TABLE_ROWS = 1000;

/** highlightedSQL returns a <code> with the query's tokens as spans (text only). */
export function highlightedSQL(query) {
  return h('code', null, tokenizeSQL(displaySQL(query)).map((t) =>
    t.type === 'ws' || t.type === 'other' ? t.text : h(`span.tok-${t.type}`, null, t.text)));
}

function parseArgs(args) {
  if (args && typeof args === 'object') return args;
  if (typeof args === 'string') {
    try {
      return JSON.parse(args);
    } catch {
      return {};
    }
  }
  return {};
}

function spinner() {
  return h('span.spinner', { 'aria-hidden': 'true' });
}

function firstLine(s, max = 140) {
  const l = String(s || '').split('\n').find((x) => x.trim()) || '';
  return l.length > max ? `${l.slice(0, max - 1)}…` : l;
}

/**
 * createToolCard returns the card for a tool call: {el, setResult(ev),
 * setStored(toolCall)}. ctx.onDatasetLoaded is called after a successful
 * load_dataset.
 */
export function createToolCard(tool, args, ctx = {}) {
  const a = parseArgs(args);
  switch (tool) {
    case 'execute_sql':
      return new SQLCard(a);
    case 'load_dataset':
      return new CompactCard('data', 'Load dataset', a.url || '', (ok) => ok && ctx.onDatasetLoaded && ctx.onDatasetLoaded());
    case 'search_documents':
      return new SearchCard(a);
    case 'request_confirmation':
      return new DecisionCard(a);
    default:
      return new CompactCard('file', tool.replace(/_/g, ' '), Object.keys(a).length ? JSON.stringify(a) : '');
  }
}

class SQLCard {
  constructor(args) {
    this.query = String(args.query ?? args.sql ?? '');
    this.source = args.source ? String(args.source) : ''; // the database it ran on; none: the datasets
    this.status = h('span.card-status.running', null, spinner(), 'Running…');
    this.result = h('div.card-result');
    this.el = h('details.tool-card.sql-card', { testid: 'sql-card', open: true, dataset: { state: 'running' } },
      h('summary', null,
        h('span.card-icon', null, icon('table', 16)),
        h('span.card-title', null, 'SQL query'),
        this.source ? h('span.card-detail.sql-source', { testid: 'sql-source', title: `Ran in the database ${this.source}` }, `on ${this.source}`) : null,
        this.status,
        h('span.card-chevron', null, icon('chevron', 14))),
      h('div.card-body', null,
        h('div.sql-wrap', null,
          h('pre.sql', null, highlightedSQL(this.query)),
          h('button.icon-btn.copy-sql', { type: 'button', title: 'Copy SQL', 'aria-label': 'Copy SQL', onclick: (e) => copy(e.currentTarget, this.query) }, icon('copy', 15))),
        this.result));
  }

  setResult(ev) {
    clear(this.status);
    clear(this.result);
    this.status.classList.remove('running');
    if (!ev.ok) {
      this.fail(ev.error || ev.content || 'The query failed.');
      return;
    }
    this.el.dataset.state = 'ok';
    if (Array.isArray(ev.columns)) {
      const r = { columns: ev.columns, rows: ev.rows || [], row_count: ev.row_count ?? (ev.rows || []).length, truncated: !!ev.truncated, elapsed_ms: ev.elapsed_ms };
      this.status.append(icon('check', 14), `${formatCount(r.row_count)} row${r.row_count === 1 ? '' : 's'}${r.elapsed_ms !== undefined && r.elapsed_ms !== null ? ` · ${formatMS(r.elapsed_ms)}` : ''}`);
      this.view = new ResultView(r, { query: this.query, title: () => questionOf(this.el) });
      this.result.append(this.view.el);
    } else {
      this.showText(ev.content);
    }
  }

  /** highlight shows the result cell a checked number came from. */
  highlight(row, col) {
    this.el.open = true;
    return !!this.view && this.view.highlight(row, col);
  }

  /**
   * describe says where a checked number came from, for its mark's tooltip:
   * the query, and the column and value shown at result row and column (the
   * row count when row is null).
   */
  describe(row, col) {
    const lines = [];
    if (this.view) {
      if (row === null || row === undefined) lines.push(`The query's row count: ${formatCount(this.view.rowCount)}`);
      else {
        const c = this.view.columns[col];
        const r = this.view.rows[row];
        if (c && r) lines.push(`From the query result, row ${row + 1}, ${c.name}: ${formatCell(r[col], c.type, c.name)}`);
      }
    }
    if (this.query) lines.push(`Query: ${this.query.length > 300 ? `${this.query.slice(0, 300)}…` : this.query}`);
    return lines.join('\n');
  }

  setStored(tc) {
    clear(this.status);
    clear(this.result);
    this.status.classList.remove('running');
    if (!tc.ok) {
      this.fail(tc.error || tc.result || 'The query failed.');
      return;
    }
    this.el.dataset.state = 'ok';
    // An approved confirmation stores its result behind this line.
    const text = String(tc.result ?? '').replace(/^The user approved\. Result:\n/, '');
    const parsed = storedResult(text, tc.columns);
    const ms = Number.isFinite(tc.duration_ms) && tc.duration_ms > 0 ? ` · ${formatMS(tc.duration_ms)}` : '';
    if (parsed) {
      this.status.append(icon('check', 14), `${formatCount(parsed.row_count)} row${parsed.row_count === 1 ? '' : 's'}${ms}`);
      const note = parsed.partial ? `Reopened: showing the ${formatCount(parsed.rows.length)} rows the assistant read; run the query again for all of them.` : '';
      this.view = new ResultView(parsed, { query: this.query, note, elapsedMS: tc.duration_ms, title: () => questionOf(this.el) });
      this.result.append(this.view.el);
    } else {
      this.status.append(icon('check', 14), `Done${ms}`);
      this.showText(text);
    }
  }

  showText(text) {
    this.result.append(h('pre.result-text', null, String(text ?? '')));
  }

  fail(message) {
    this.el.dataset.state = 'failed';
    this.el.classList.add('failed');
    this.el.open = false;
    this.status.classList.add('failed');
    this.status.append(icon('alert', 14), h('span.card-status-text', null, `Failed: ${firstLine(message)}`));
    this.result.append(h('div.card-error', { role: 'note' }, String(message)));
  }
}

/**
 * questionOf is the question an answer's card answers (the user's message
 * before it), or "" for SQL the user ran: downloads are named after it.
 */
export function questionOf(el) {
  const msg = el && el.closest && el.closest('article.msg');
  if (!msg || msg.classList.contains('user-sql')) return '';
  for (let m = msg.previousElementSibling; m; m = m.previousElementSibling) {
    if (m.matches('article.msg.user:not(.user-sql)')) return (m.querySelector('.bubble') || m).textContent || '';
  }
  return '';
}

const KIND_LABELS = { bar: 'Bar', line: 'Line', area: 'Area', scatter: 'Scatter', pie: 'Pie' };

async function copy(btn, text) {
  try {
    await navigator.clipboard.writeText(text);
    btn.classList.add('copied');
    setTimeout(() => btn.classList.remove('copied'), 1200);
  } catch {
    /* clipboard unavailable (insecure origin): ignore */
  }
}

/**
 * ResultView is a result table (sortable by its headers, scrollable), with
 * CSV and XLSX downloads, and a chart drawn at once when the result suits
 * one (a label column and a few numeric ones), whose kind can be switched or
 * which can be hidden; a result that does not suit one says why.
 * title, when given, returns what downloads are named after (the question).
 */
export class ResultView {
  constructor(result, { query = '', note = '', elapsedMS, title } = {}) {
    this.columns = result.columns || [];
    this.rows = (result.rows || []).slice(0, MAX_TABLE_ROWS);
    this.sorted = this.rows;
    this.sort = null;
    this.query = query;
    this.chart = null;
    this.spec = pickChart(this.columns, this.rows);
    this.kind = this.spec ? this.spec.kind : 'bar';
    this.title = typeof title === 'function' ? title : () => '';

    const count = result.row_count ?? this.rows.length;
    this.rowCount = count;
    const elapsed = result.elapsed_ms ?? elapsedMS;
    const meta = [`${formatCount(count)} row${count === 1 ? '' : 's'}`];
    if (elapsed !== undefined && elapsed !== null && Number(elapsed) > 0) meta.push(formatMS(elapsed));
    if (result.truncated) meta.push('more rows exist (result cut)');

    const why = this.spec ? '' : whyNoChart(this.columns, this.rows);
    this.chartBtn = this.spec
      ? h('button.btn.small.ghost', { type: 'button', testid: 'chart-button', 'aria-pressed': 'true', title: 'Hide the chart', onclick: () => this.toggleChart() }, icon('chart', 15), 'Chart')
      : h('span.chart-none', { testid: 'chart-none', title: 'A chart needs two rows or more, a label column (text or dates) and a number column' }, `No chart: ${why}`);
    const csvBtn = h('button.btn.small.ghost', { type: 'button', testid: 'csv-button', title: 'Download as CSV', onclick: () => downloadText(toCSV(this.columns, this.sorted), this.fileName('csv')) }, icon('download', 15), 'CSV');
    const xlsxBtn = h('button.btn.small.ghost', { type: 'button', testid: 'xlsx-button', title: 'Download as an Excel workbook', onclick: () => this.downloadXLSX() }, icon('download', 15), 'XLSX');
    this.chartWrap = h('div.chart-wrap', { hidden: !this.spec });
    this.thead = h('thead');
    this.tbody = h('tbody');
    this.table = h('table.result-table', { testid: 'result-table' }, this.thead, this.tbody);
    this.el = h('div.result',
      null,
      h('div.result-bar', null, h('span.result-meta', null, meta.join(' · ')), h('span.spacer'), this.chartBtn, csvBtn, xlsxBtn),
      note ? h('p.result-note', null, note) : null,
      this.chartWrap,
      h('div.table-wrap', { tabindex: '0', 'aria-label': 'Query result' }, this.table));
    this.renderHead();
    this.renderBody();
    if (this.spec) this.drawChart();
  }

  /** fileName names a download after the question, else the query. */
  fileName(ext) {
    return resultFileName(this.title() || this.query, ext);
  }

  downloadXLSX() {
    const name = this.fileName('xlsx');
    downloadText(toXLSX(this.columns, this.sorted, name.replace(/\.xlsx$/, '')), name, XLSX_TYPE);
  }

  renderHead() {
    clear(this.thead);
    const tr = h('tr');
    this.columns.forEach((c, i) => {
      const dir = this.sort && this.sort.col === i ? this.sort.dir : null;
      tr.append(h('th', {
        class: isNumericType(c.type) ? 'num' : null,
        'aria-sort': dir === 'asc' ? 'ascending' : dir === 'desc' ? 'descending' : 'none',
        scope: 'col',
      }, h('button.th-btn', { type: 'button', title: `${c.sql_type || c.type} · click to sort`, onclick: () => this.sortBy(i) },
        h('span.th-name', null, c.name),
        h('span.th-sort', { 'aria-hidden': 'true' }, dir === 'asc' ? '▲' : dir === 'desc' ? '▼' : ''),
        h('span.th-type', null, c.type || ''))));
    });
    this.thead.append(tr);
  }

  renderBody() {
    clear(this.tbody);
    const numeric = this.columns.map((c) => isNumericType(c.type));
    const frag = document.createDocumentFragment();
    if (!this.sorted.length) {
      frag.append(h('tr', null, h('td.empty-cell', { colspan: String(Math.max(1, this.columns.length)) }, 'No rows')));
    }
    for (const r of this.sorted) {
      const tr = document.createElement('tr');
      tr.dataset.row = String(this.rows.indexOf(r));
      this.columns.forEach((c, i) => {
        const v = r[i];
        const td = document.createElement('td');
        if (numeric[i]) td.className = 'num';
        if (v === null || v === undefined) td.classList.add('null');
        td.textContent = formatCell(v, c.type, c.name);
        tr.append(td);
      });
      frag.append(tr);
    }
    this.tbody.append(frag);
  }

  /**
   * highlight marks the cell of result row and column (indexes into the
   * result as the server sent it, whatever the sort), or the row count when
   * they are null, and scrolls it into view.
   */
  highlight(row, col) {
    for (const el of this.el.querySelectorAll('.cell-highlight')) el.classList.remove('cell-highlight');
    let target;
    if (row === null || row === undefined) target = this.el.querySelector('.result-meta');
    else {
      const tr = this.tbody.querySelector(`tr[data-row="${Number(row)}"]`);
      target = tr && tr.children[Number(col)];
    }
    if (!target) return false;
    target.classList.add('cell-highlight');
    target.scrollIntoView({ block: 'nearest', inline: 'nearest' });
    return true;
  }

  sortBy(i) {
    this.sort = nextSort(this.sort, i);
    this.sorted = this.sort ? sortRows(this.rows, i, this.columns[i].type, this.sort.dir) : this.rows;
    this.renderHead();
    this.renderBody();
  }

  async toggleChart() {
    if (!this.chartWrap.hidden) {
      this.chartWrap.hidden = true;
      this.chartBtn.setAttribute('aria-pressed', 'false');
      this.chartBtn.title = 'Show the chart';
      if (this.chart) this.chart.destroy();
      this.chart = null;
      return;
    }
    this.chartWrap.hidden = false;
    this.chartBtn.setAttribute('aria-pressed', 'true');
    this.chartBtn.title = 'Hide the chart';
    await this.drawChart();
  }

  async drawChart() {
    const spec = pickChart(this.columns, this.rows, { kind: this.kind });
    clear(this.chartWrap);
    const kinds = h('div.seg', { role: 'group', 'aria-label': 'Chart type', testid: 'chart-kinds' },
      kindsFor(spec).map((k) => h('button.seg-btn', { type: 'button', dataset: { kind: k }, 'aria-pressed': String(k === spec.kind), onclick: () => { this.kind = k; this.drawChart(); } }, KIND_LABELS[k])));
    const canvas = h('canvas', { role: 'img', 'aria-label': spec.title });
    append(this.chartWrap, [
      h('div.chart-head', null, h('span.chart-title', null, spec.title), h('span.spacer'), kinds),
      h('div.chart-view', { testid: 'chart', dataset: { kind: spec.kind } }, canvas),
      spec.note ? h('p.result-note', null, spec.note) : null]);
    if (this.chart) this.chart.destroy();
    this.chart = null;
    const drawing = (this.drawing = {});
    try {
      const chart = await drawChart(canvas, spec);
      if (this.drawing !== drawing || this.chartWrap.hidden) chart.destroy(); // switched or hidden meanwhile
      else this.chart = chart;
    } catch (err) {
      this.chartWrap.append(h('p.card-error', null, err.message));
    }
  }
}

class CompactCard {
  constructor(iconName, title, detail, onDone) {
    this.onDone = onDone;
    this.status = h('span.card-status.running', null, spinner(), 'Working…');
    this.body = h('div.card-body');
    this.el = h('details.tool-card.compact', { dataset: { state: 'running' } },
      h('summary', null,
        h('span.card-icon', null, icon(iconName, 16)),
        h('span.card-title', null, title),
        detail ? h('span.card-detail', { title: detail }, detail) : null,
        this.status,
        h('span.card-chevron', null, icon('chevron', 14))),
      this.body);
  }

  finish(ok, text, error) {
    clear(this.status);
    clear(this.body);
    this.status.classList.remove('running');
    this.el.dataset.state = ok ? 'ok' : 'failed';
    if (ok) {
      this.status.append(icon('check', 14), 'Done');
      this.body.append(h('pre.result-text', null, String(text ?? '')));
    } else {
      this.el.classList.add('failed');
      this.status.classList.add('failed');
      this.status.append(icon('alert', 14), 'Failed');
      this.body.append(h('div.card-error', null, String(error || text || 'Failed.')));
    }
    if (this.onDone) this.onDone(ok);
  }

  setResult(ev) {
    this.finish(ev.ok, ev.content, ev.error);
  }

  setStored(tc) {
    this.onDone = null; // history: nothing to refresh
    this.finish(tc.ok, tc.result, tc.error);
  }
}

class SearchCard extends CompactCard {
  constructor(args) {
    super('search', 'Search documents', args.query ? `“${args.query}”` : '');
  }

  finish(ok, text, error) {
    super.finish(ok, text, error);
    if (!ok) return;
    const sources = parseSourcesText(text);
    if (!sources.size) return;
    clear(this.status);
    this.status.append(icon('check', 14), `${sources.size} excerpt${sources.size === 1 ? '' : 's'}`);
    clear(this.body);
    this.body.append(h('ol.excerpts', null, [...sources.entries()].map(([n, s]) =>
      h('li', { value: String(n) },
        h('div.excerpt-head', null, sourceLabel(s)),
        h('div.excerpt-text', null, s.text)))));
  }
}

/** DecisionCard shows the answer to a request_confirmation call. */
class DecisionCard extends CompactCard {
  constructor(args) {
    const labels = { execute_sql: 'Run an SQL query', load_dataset: 'Load a dataset' };
    super('check', 'Approval', labels[args.action] || String(args.action || ''));
  }

  finish(ok, text, error) {
    super.finish(ok, text, error);
    if (ok || !/declined/i.test(String(error || text))) return;
    clear(this.status);
    clear(this.body);
    this.el.classList.remove('failed');
    this.el.dataset.state = 'declined';
    this.status.classList.remove('failed');
    this.status.classList.add('declined');
    this.status.append('Declined');
    this.body.append(h('pre.result-text', null, String(text || error)));
  }
}

/** sourceLabel is "document · page n" (or section) for a source. */
export function sourceLabel(s) {
  const m = (s && s.metadata) || {};
  const parts = [String(m.document || m.source || 'Document')];
  if (Number(m.page) > 0) parts.push(`page ${m.page}`);
  else if (m.heading || m.section) parts.push(`“${m.heading || m.section}”`);
  return parts.join(' · ');
}
