// The files a conversation takes in, as the server lists them
// (GET /api/formats, built from the Go code that reads them): the page
// routes dropped files, fills the file pickers' accept lists and names the
// formats in its messages from that one list, never from a copy of its own.

/** @typedef {{name: string, extensions: string[]}} FileFormat */
/**
 * @typedef {object} Formats
 * @property {{formats: FileFormat[], compression: string[]}} datasets
 * @property {{formats: FileFormat[]}} documents
 * @property {{max_chars: number}} [question]
 */

const lists = (f) => ({
  datasets: (f && f.datasets && Array.isArray(f.datasets.formats)) ? f.datasets.formats : [],
  compression: (f && f.datasets && Array.isArray(f.datasets.compression)) ? f.datasets.compression : [],
  documents: (f && f.documents && Array.isArray(f.documents.formats)) ? f.documents.formats : [],
});

const extsOf = (formats) => formats.flatMap((x) => (Array.isArray(x.extensions) ? x.extensions : [])).map((e) => String(e).toLowerCase());

/**
 * kindOfFile routes a file by its name: 'dataset' (a dataset format's
 * extension, optionally compressed), 'document', or null when the server
 * lists neither.
 * @param {string} name
 * @param {Formats|null} formats
 */
export function kindOfFile(name, formats) {
  const n = String(name || '').toLowerCase();
  const l = lists(formats);
  const ds = extsOf(l.datasets);
  if (ds.some((e) => n.endsWith(e) || l.compression.some((c) => n.endsWith(e + String(c).toLowerCase())))) return 'dataset';
  if (extsOf(l.documents).some((e) => n.endsWith(e))) return 'document';
  return null;
}

/**
 * acceptList is a file input's accept attribute for one kind: every
 * extension listed (and, for datasets, the compression suffixes, which a
 * picker matches by the last extension only).
 */
export function acceptList(kind, formats) {
  const l = lists(formats);
  const exts = kind === 'dataset' ? [...extsOf(l.datasets), ...l.compression] : extsOf(l.documents);
  return [...new Set(exts)].join(',');
}

/** formatNames names one kind's formats for people: "CSV, TSV, Parquet or Excel". */
export function formatNames(kind, formats) {
  const l = lists(formats);
  const names = (kind === 'dataset' ? l.datasets : l.documents).map((x) => String(x.name || '')).filter(Boolean);
  if (names.length < 2) return names.join('');
  return `${names.slice(0, -1).join(', ')} or ${names[names.length - 1]}`;
}

/** maxQuestionChars is the longest question the chat accepts (0: not known). */
export function maxQuestionChars(formats) {
  const n = Number(formats && formats.question && formats.question.max_chars);
  return Number.isFinite(n) && n > 0 ? n : 0;
}
