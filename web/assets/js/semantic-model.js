// The semantic layer editor's model, without the DOM: a table as the server
// gives it (GET …/dictionary/tables) turned into a draft the form edits, the
// change a save sends (PATCH …/dictionary/tables: only what differs from
// what was loaded, removals as empty texts, so a save never drops what
// another tab saved meanwhile), and the server's problems placed on the
// rows they are about.

let nextId = 1;
const rowId = () => `r${nextId++}`;

/** splitList reads "a, b" as ['a', 'b']. */
export function splitList(text) {
  return String(text || '').split(',').map((s) => s.trim()).filter(Boolean);
}

/**
 * draftOf makes the editable copy of a table.
 * @param {object} t a table of GET …/dictionary/tables
 */
export function draftOf(t) {
  const columns = {};
  for (const c of t.columns || []) columns[c.name] = c.description || '';
  return {
    description: t.description || '',
    columns,
    metrics: Object.entries(t.metrics || {}).sort(([a], [b]) => a.localeCompare(b))
      .map(([name, m]) => ({ id: rowId(), name, sql: m.sql || '', filter: m.filter || '', description: m.description || '' })),
    synonyms: Object.entries(t.synonyms || {}).sort(([a], [b]) => a.localeCompare(b))
      .map(([term, meaning]) => ({ id: rowId(), term, meaning: meaning || '' })),
    relationships: (t.relationships || []).map((r) => ({
      id: rowId(), columns: (r.columns || []).join(', '), ref_table: r.ref_table || '', ref_columns: (r.ref_columns || []).join(', '),
    })),
  };
}

/** newRow is an empty row of a kind: 'metrics', 'synonyms' or 'relationships'. */
export function newRow(kind) {
  if (kind === 'metrics') return { id: rowId(), name: '', sql: '', filter: '', description: '' };
  if (kind === 'synonyms') return { id: rowId(), term: '', meaning: '' };
  return { id: rowId(), columns: '', ref_table: '', ref_columns: '' };
}

const blank = (row, parts) => parts.every((p) => !String(row[p] || '').trim());

/**
 * changesOf compares a draft with the table it was made from.
 * @param {object} base the table as loaded or last saved
 * @param {object} draft
 * @param {boolean} descriptions whether the table's and its columns'
 *   descriptions are edited here (a source's table) or elsewhere (a dataset)
 * @returns {{change: object|null, problems: {kind: string, id?: string, part?: string, message: string}[], relIds: string[]}}
 *   change: the body's changes (null: nothing changed); problems found
 *   before sending; relIds: the row of each relationship sent, in order
 */
export function changesOf(base, draft, descriptions) {
  const change = {};
  const problems = [];
  const say = (kind, id, part, message) => problems.push({ kind, id, part, message });
  if (descriptions) {
    if (draft.description.trim() !== (base.description || '').trim()) change.description = draft.description.trim();
    const cols = {};
    for (const c of base.columns || []) {
      const now = (draft.columns[c.name] || '').trim();
      if (now !== (c.description || '').trim()) cols[c.name] = now;
    }
    if (Object.keys(cols).length) change.columns = cols;
  }

  const metrics = {};
  const seen = new Map();
  for (const m of draft.metrics) {
    if (blank(m, ['name', 'sql', 'filter', 'description'])) continue;
    const name = m.name.trim();
    if (!name) {
      say('metrics', m.id, 'name', 'Give the metric a name, e.g. revenue.');
      continue;
    }
    if (seen.has(name)) {
      say('metrics', m.id, 'name', `Two metrics are named ${name}: rename one.`);
      continue;
    }
    seen.set(name, m);
    if (!m.sql.trim()) {
      say('metrics', m.id, 'sql', `Write the SQL expression of ${name}, e.g. sum(amount) or count(*).`);
      continue;
    }
    const was = (base.metrics || {})[name];
    const now = { sql: m.sql.trim(), filter: m.filter.trim(), description: m.description.trim() };
    if (!was || was.sql !== now.sql || (was.filter || '') !== now.filter || (was.description || '') !== now.description) metrics[name] = now;
  }
  for (const name of Object.keys(base.metrics || {})) {
    if (!seen.has(name)) metrics[name] = { sql: '' };
  }
  if (Object.keys(metrics).length) change.metrics = metrics;

  const synonyms = {};
  const terms = new Set();
  for (const s of draft.synonyms) {
    if (blank(s, ['term', 'meaning'])) continue;
    const term = s.term.trim();
    if (!term) {
      say('synonyms', s.id, 'term', 'Write the word the user may use, e.g. EMEA.');
      continue;
    }
    if (terms.has(term)) {
      say('synonyms', s.id, 'term', `“${term}” is given twice: keep one.`);
      continue;
    }
    terms.add(term);
    if (!s.meaning.trim()) {
      say('synonyms', s.id, 'meaning', `Say what “${term}” means: a column, a metric or a condition such as region IN ('DE', 'FR').`);
      continue;
    }
    if ((base.synonyms || {})[term] !== s.meaning.trim()) synonyms[term] = s.meaning.trim();
  }
  for (const term of Object.keys(base.synonyms || {})) {
    if (!terms.has(term)) synonyms[term] = '';
  }
  if (Object.keys(synonyms).length) change.synonyms = synonyms;

  const rels = [];
  const relIds = [];
  for (const r of draft.relationships) {
    if (blank(r, ['columns', 'ref_table', 'ref_columns'])) continue;
    const rel = { columns: splitList(r.columns), ref_table: r.ref_table.trim(), ref_columns: splitList(r.ref_columns) };
    if (!rel.columns.length) say('relationships', r.id, 'columns', 'Name the column (or columns, separated by commas) of this table that joins.');
    else if (!rel.ref_table) say('relationships', r.id, 'ref_table', 'Choose the table it joins to.');
    else if (rel.columns.length !== rel.ref_columns.length) say('relationships', r.id, 'ref_columns', `Give as many columns of ${rel.ref_table} as of this table (${rel.columns.length}).`);
    else {
      rels.push(rel);
      relIds.push(r.id);
    }
  }
  if (JSON.stringify(rels) !== JSON.stringify((base.relationships || []).map((r) => ({ columns: r.columns, ref_table: r.ref_table, ref_columns: r.ref_columns })))) {
    change.relationships = rels;
  }
  return { change: Object.keys(change).length ? change : null, problems, relIds };
}

/**
 * placeProblems puts the server's problems ({field, message}) on the rows
 * of the draft they are about: {kind, id, part, message}; a problem of the
 * table as a whole (or a row no longer there) is {kind: 'table', message}.
 * @param {object} draft
 * @param {{field: string, message: string}[]} problems
 * @param {string[]} relIds the rows of the relationships sent, in order
 */
export function placeProblems(draft, problems, relIds = []) {
  return (problems || []).map((p) => {
    const field = String(p.field || '');
    const message = String(p.message || '');
    const dot = field.lastIndexOf('.');
    const part = dot > 0 ? field.slice(dot + 1) : '';
    if (field.startsWith('metrics.') && dot > 8) {
      const name = field.slice(8, dot);
      const row = draft.metrics.find((m) => m.name.trim() === name);
      if (row) return { kind: 'metrics', id: row.id, part, message };
    } else if (field.startsWith('synonyms.') && dot > 9) {
      const term = field.slice(9, dot);
      const row = draft.synonyms.find((s) => s.term.trim() === term);
      if (row) return { kind: 'synonyms', id: row.id, part, message };
    } else if (field.startsWith('relationships.') && dot > 14) {
      const id = relIds[Number(field.slice(14, dot))];
      if (id) return { kind: 'relationships', id, part, message };
    } else if (field.startsWith('columns.')) {
      return { kind: 'columns', id: field.slice(8), part: 'description', message };
    } else if (field === 'description') {
      return { kind: 'description', message };
    }
    return { kind: 'table', message };
  });
}

/** summary says what a table's layer holds: "2 metrics · 1 synonym · 1 join". */
export function summary(t) {
  const n = (k) => Object.keys(t[k] || {}).length;
  const parts = [];
  const plural = (count, one, many) => `${count} ${count === 1 ? one : many}`;
  if (n('metrics')) parts.push(plural(n('metrics'), 'metric', 'metrics'));
  if (n('synonyms')) parts.push(plural(n('synonyms'), 'synonym', 'synonyms'));
  if ((t.relationships || []).length) parts.push(plural(t.relationships.length, 'join', 'joins'));
  return parts.join(' · ');
}

/** tableKey names a table of GET …/dictionary/tables uniquely. */
export function tableKey(t) {
  return t.kind === 'source' ? `source:${t.source}:${t.name}` : `dataset:${t.dataset_id}`;
}

/** formatValue shows a metric's value as computed when it was saved. */
export function formatValue(v) {
  if (v === null || v === undefined) return 'no value (no rows)';
  if (typeof v === 'number') return v.toLocaleString('en-US', { maximumFractionDigits: 6 });
  if (typeof v === 'string' && /^-?\d+(\.\d+)?$/.test(v)) {
    const [int, frac] = v.split('.');
    return `${BigInt(int).toLocaleString('en-US')}${frac ? `.${frac}` : ''}`;
  }
  return typeof v === 'object' ? JSON.stringify(v) : String(v);
}
