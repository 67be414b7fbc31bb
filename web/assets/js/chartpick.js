// Picks a sensible chart for a query result, without the DOM or Chart.js.
//
// - a date/timestamp column (or a text column of ISO dates, or an integer column
//   named like year/month) with numeric columns → a line chart over time,
//   points in time order;
// - otherwise a text (or boolean) column with numeric columns → a bar chart of
//   the top 20 rows by the first numeric column (the query's own order is kept
//   when it has 20 rows or fewer);
// - otherwise a first numeric column whose values rise row by row (a bucket,
//   an hour, a size) with other numeric columns → a line chart over it;
// - anything else (one row, no numbers, no label) → null: no chart, and
//   whyNoChart says why in a few words.
//
// A picked chart can be drawn as another kind (KINDS; pie only for a few
// parts of one series of non-negative numbers: kindsFor).

import { isNumericType, toNumber } from './table.js';

export const MAX_BARS = 20;
export const MAX_SERIES = 5;
export const MAX_PIE = 8;
export const KINDS = ['bar', 'line', 'area', 'scatter', 'pie'];
const ISO_DATE = /^\d{4}-\d{2}(-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?)?$/;
const TIME_NAME = /^(year|yr|month|day|week|quarter|hour|date|period|time)$|(_|^)(year|month|day|week|quarter|hour|date)s?$/i;

function isTimeColumn(col, rows, i) {
  const t = String(col.type || '').toLowerCase();
  if (t === 'date' || t === 'timestamp') return true;
  const vals = rows.map((r) => r[i]).filter((v) => v !== null && v !== undefined);
  if (!vals.length) return false;
  if (t === 'text') return vals.every((v) => typeof v === 'string' && ISO_DATE.test(v));
  if (t === 'integer') return TIME_NAME.test(col.name) && vals.every((v) => Number.isInteger(toNumber(v)));
  return false;
}

function isCategoryColumn(col) {
  const t = String(col.type || '').toLowerCase();
  return t === 'text' || t === 'boolean' || t === 'uuid' || t === 'time';
}

function label(v) {
  if (v === null || v === undefined) return '(null)';
  return typeof v === 'object' ? JSON.stringify(v) : String(v);
}

// isOrderedColumn: a numeric column whose values rise strictly row by row.
function isOrderedColumn(col, rows, i) {
  if (!isNumericType(col.type)) return false;
  let prev = -Infinity;
  for (const r of rows) {
    const n = toNumber(r[i]);
    if (n === null || n <= prev) return false;
    prev = n;
  }
  return true;
}

/**
 * whyNoChart says in a few words why a result has no chart ("" when it has
 * one): one row, no number column, no label column, or no numbers at all.
 */
export function whyNoChart(columns, rows) {
  if (!Array.isArray(columns) || !Array.isArray(rows) || rows.length === 0) return 'no rows';
  if (rows.length < 2) return 'one row';
  if (!columns.some((c) => isNumericType(c.type))) return 'no number column';
  if (pickChart(columns, rows)) return '';
  const labelled = columns.some((c, i) => isTimeColumn(c, rows, i) || isCategoryColumn(c)) ||
    (columns.length > 1 && isOrderedColumn(columns[0], rows, 0));
  if (!labelled) return 'no label column for the numbers';
  return 'no numbers to plot';
}

/** kindsFor lists the kinds a picked chart can be drawn as. */
export function kindsFor(spec) {
  if (!spec) return [];
  const pie = spec.labels.length <= MAX_PIE && spec.datasets.length === 1 &&
    spec.datasets[0].data.every((v) => v === null || v >= 0) && spec.datasets[0].data.some((v) => v > 0);
  return KINDS.filter((k) => k !== 'pie' || pie);
}

/**
 * pickChart returns {kind, x, ys, labels, datasets:[{label, data}], title,
 * note} or null when the result does not chart well. kind is 'line' or
 * 'bar', or opts.kind when the chart can be drawn so (kindsFor).
 * @param {{name:string,type:string}[]} columns
 * @param {any[][]} rows
 * @param {{kind?: string}} [opts] force a kind once a chart is possible
 */
export function pickChart(columns, rows, opts = {}) {
  if (!Array.isArray(columns) || !Array.isArray(rows) || rows.length < 2) return null;
  const timeIdx = columns.findIndex((c, i) => isTimeColumn(c, rows, i));
  let x = timeIdx;
  let kind = 'line';
  if (x === -1) {
    x = columns.findIndex(isCategoryColumn);
    kind = 'bar';
  }
  if (x === -1 && columns.length > 1 && isOrderedColumn(columns[0], rows, 0)) {
    x = 0;
    kind = 'line';
  }
  if (x === -1) return null;
  const ys = [];
  columns.forEach((c, i) => {
    if (i !== x && isNumericType(c.type) && !isTimeColumn(c, rows, i) && ys.length < MAX_SERIES) ys.push(i);
  });
  if (!ys.length) return null;
  // Series on very different scales (a count beside an average) make one of
  // them unreadable: keep only those within 10× of the first one's range.
  const span = (i) => Math.max(...rows.map((r) => Math.abs(toNumber(r[i]) ?? 0)));
  const first = span(ys[0]);
  for (let k = ys.length - 1; k > 0; k--) {
    const s = span(ys[k]);
    if (first && s && (s > first * 10 || s < first / 10)) ys.splice(k, 1);
  }
  if (!ys.some((i) => rows.some((r) => toNumber(r[i]) !== null))) return null;

  let picked = rows;
  let note = '';
  if (kind === 'line') {
    picked = rows
      .filter((r) => r[x] !== null && r[x] !== undefined)
      .map((r, k) => [r, k])
      .sort(([a, i], [b, j]) => {
        const p = a[x];
        const q = b[x];
        if (typeof p === 'number' && typeof q === 'number') return p - q || i - j;
        return String(p) < String(q) ? -1 : String(p) > String(q) ? 1 : i - j;
      })
      .map(([r]) => r);
  } else if (rows.length > MAX_BARS) {
    const y = ys[0];
    picked = rows
      .map((r, k) => [r, k])
      .sort(([a, i], [b, j]) => (toNumber(b[y]) ?? -Infinity) - (toNumber(a[y]) ?? -Infinity) || i - j)
      .slice(0, MAX_BARS)
      .map(([r]) => r);
    note = `Top ${MAX_BARS} of ${rows.length} rows by ${columns[y].name}.`;
  }
  const spec = {
    kind,
    x,
    ys,
    labels: picked.map((r) => label(r[x])),
    datasets: ys.map((i) => ({ label: columns[i].name, data: picked.map((r) => toNumber(r[i])) })),
    title: `${ys.map((i) => columns[i].name).join(', ')} by ${columns[x].name}`,
    note,
  };
  if (opts.kind && kindsFor(spec).includes(opts.kind)) spec.kind = opts.kind;
  return spec;
}
