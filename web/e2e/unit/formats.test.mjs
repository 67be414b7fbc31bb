import { test } from 'node:test';
import assert from 'node:assert/strict';
import { kindOfFile, acceptList, formatNames, maxQuestionChars } from '../../assets/js/formats.js';

// The shape GET /api/formats answers (internal/server/formats.go).
const FORMATS = {
  datasets: {
    formats: [
      { name: 'CSV', extensions: ['.csv'] }, { name: 'Parquet', extensions: ['.parquet', '.pq'] },
      { name: 'Excel', extensions: ['.xlsx'] }, { name: 'JSON', extensions: ['.json'] }, { name: 'NDJSON', extensions: ['.ndjson', '.jsonl'] },
    ],
    compression: ['.gz', '.zst'],
  },
  documents: { formats: [{ name: 'PDF', extensions: ['.pdf'] }, { name: 'Markdown', extensions: ['.md'] }, { name: 'Word (DOCX)', extensions: ['.docx'] }] },
  question: { max_chars: 2000 },
};

test('dropped files are routed by the server’s list of formats', () => {
  assert.equal(kindOfFile('sales.csv', FORMATS), 'dataset');
  assert.equal(kindOfFile('x.parquet', FORMATS), 'dataset');
  assert.equal(kindOfFile('x.csv.gz', FORMATS), 'dataset');
  assert.equal(kindOfFile('Budget 2026.XLSX', FORMATS), 'dataset');
  assert.equal(kindOfFile('penguins.json', FORMATS), 'dataset');
  assert.equal(kindOfFile('log.ndjson.zst', FORMATS), 'dataset');
  assert.equal(kindOfFile('Report.PDF', FORMATS), 'document');
  assert.equal(kindOfFile('notes.md', FORMATS), 'document');
  assert.equal(kindOfFile('a.docx', FORMATS), 'document');
  assert.equal(kindOfFile('image.png', FORMATS), null);
  assert.equal(kindOfFile('x.pdf.gz', FORMATS), null);
  // Before the list arrives nothing is known: the drop zone's own kind decides.
  assert.equal(kindOfFile('sales.csv', null), null);
});

test('the pickers accept every listed extension', () => {
  assert.equal(acceptList('dataset', FORMATS), '.csv,.parquet,.pq,.xlsx,.json,.ndjson,.jsonl,.gz,.zst');
  assert.equal(acceptList('document', FORMATS), '.pdf,.md,.docx');
  assert.equal(acceptList('dataset', null), '');
});

test('formats are named for people', () => {
  assert.equal(formatNames('dataset', FORMATS), 'CSV, Parquet, Excel, JSON or NDJSON');
  assert.equal(formatNames('document', FORMATS), 'PDF, Markdown or Word (DOCX)');
  assert.equal(formatNames('document', { documents: { formats: [{ name: 'PDF', extensions: [] }] } }), 'PDF');
  assert.equal(formatNames('dataset', null), '');
});

test('the question limit is read when the server says it', () => {
  assert.equal(maxQuestionChars(FORMATS), 2000);
  assert.equal(maxQuestionChars({ question: { max_chars: 0 } }), 0);
  assert.equal(maxQuestionChars(null), 0);
});

test('search marks each match, ignoring case', async () => {
  const { markMatches } = await import('../../assets/js/search.js');
  assert.deepEqual(markMatches('Otters eat; the otter sleeps', 'OTTER'), [
    { text: 'Otter', match: true }, { text: 's eat; the ', match: false }, { text: 'otter', match: true }, { text: ' sleeps', match: false },
  ]);
  assert.deepEqual(markMatches('no match', 'x'), [{ text: 'no match', match: false }]);
  assert.deepEqual(markMatches('abc', ''), [{ text: 'abc', match: false }]);
});
