// Unit tests of the Markdown renderer, hostile input first.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseMarkdown, toHTML, safeHref, ALLOWED, textOf } from '../../assets/js/markdown.js';

const html = (md) => toHTML(parseMarkdown(md));

// Walks a tree and fails on any tag or attribute outside the allow-list.
function assertClean(nodes) {
  for (const n of nodes) {
    if (typeof n === 'string') continue;
    assert.ok(n.tag in ALLOWED, `tag ${n.tag} is not allowed`);
    for (const [k, v] of Object.entries(n.attrs || {})) {
      assert.ok(ALLOWED[n.tag].includes(k), `attribute ${k} on ${n.tag}`);
      if (k === 'href') assert.match(v, /^https?:\/\//);
    }
    assertClean(n.children || []);
  }
}

const hostile = [
  '<img src=x onerror=alert(1)>',
  '<script>alert(1)</script>',
  '[click](javascript:alert(1))',
  '[click](JaVaScRiPt:alert(1))',
  '[click]( javascript:alert(1) )',
  '[click](java\tscript:alert(1))',
  '[click](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)',
  '[click](vbscript:msgbox)',
  '[click](//evil.example/x)',
  '![x](javascript:alert(1))',
  '<javascript:alert(1)>',
  '| a | b |\n|---|---|\n| <script>alert(1)</script> | <img src=x onerror=alert(1)> |',
  '```html\n<script>alert(1)</script>\n```',
  '`<b onmouseover=alert(1)>`',
  '# <svg onload=alert(1)>',
  '- <iframe src="https://evil.example"></iframe>',
  '> <a href="javascript:alert(1)">x</a>',
  '**<style>body{display:none}</style>**',
  '[x](https://ok.example/"onmouseover="alert(1))',
  '[x](https://ok.example/ "t\\" onmouseover=\\"alert(1)")',
];

for (const md of hostile) {
  test(`hostile input stays inert: ${JSON.stringify(md)}`, () => {
    const tree = parseMarkdown(md);
    assertClean(tree);
    const out = toHTML(tree);
    assert.doesNotMatch(out, /<(script|img|iframe|svg|style)\b/i);
    assert.doesNotMatch(out, /href="(?!https?:)/i);
    assert.doesNotMatch(out, /<[^>]+\son\w+=/i, 'no event-handler attribute on a real tag');
  });
}

test('javascript: links keep their text but lose the link', () => {
  assert.equal(html('[click](javascript:alert(1))'), '<p><span>click</span></p>');
});

test('raw HTML is shown as text', () => {
  assert.equal(html('<img src=x onerror=alert(1)>'), '<p>&lt;img src=x onerror=alert(1)&gt;</p>');
});

test('safeHref', () => {
  assert.equal(safeHref('https://example.com/a b'), null);
  assert.equal(safeHref('http://example.com/x?y=1#z'), 'http://example.com/x?y=1#z');
  assert.equal(safeHref('HTTPS://EXAMPLE.com'), 'https://example.com/');
  assert.equal(safeHref('javascript:alert(1)'), null);
  assert.equal(safeHref('mailto:a@b.c'), null);
  assert.equal(safeHref('/relative'), null);
});

test('links are http(s) with rel=noopener', () => {
  assert.equal(html('[docs](https://duckdb.org/docs "DuckDB")'),
    '<p><a href="https://duckdb.org/docs" title="DuckDB" rel="noopener noreferrer nofollow" target="_blank">docs</a></p>');
  assert.match(html('see https://example.com/x.'), /<a href="https:\/\/example.com\/x" [^>]*>https:\/\/example.com\/x<\/a>\.<\/p>/);
});

test('headings, emphasis, code', () => {
  assert.equal(html('## Total **sales**'), '<h2>Total <strong>sales</strong></h2>');
  assert.equal(html('a *b* _c_ ~~d~~ `e*f*`'), '<p>a <em>b</em> <em>c</em> <del>d</del> <code>e*f*</code></p>');
  assert.equal(html('snake_case_name 2 * 3 * 4'), '<p>snake_case_name 2 * 3 * 4</p>');
  assert.equal(html('line one\nline two'), '<p>line one<br>line two</p>');
});

test('code blocks: SQL is highlighted, others are plain, unclosed fences run to the end', () => {
  assert.equal(html('```\na < b\n```'), '<pre><code>a &lt; b</code></pre>');
  assert.match(html('```sql\nSELECT 1\n```'), /<span class="tok-kw">SELECT<\/span> <span class="tok-num">1<\/span>/);
  assert.equal(html('```python\nprint(1)'), '<pre><code class="lang-python">print(1)</code></pre>');
});

test('lists, nested and ordered', () => {
  assert.equal(html('- a\n- b\n  - c\n- d'), '<ul><li>a</li><li>b<ul><li>c</li></ul></li><li>d</li></ul>');
  assert.equal(html('3. x\n4. y'), '<ol start="3"><li>x</li><li>y</li></ol>');
  assert.equal(html('- a\n\n- b'), '<ul><li><p>a</p></li><li><p>b</p></li></ul>');
  assert.equal(html('Intro:\n1. one\n2. two'), '<p>Intro:</p><ol><li>one</li><li>two</li></ol>');
});

test('tables with alignment and escaped pipes', () => {
  assert.equal(html('| n | v |\n|:-|-:|\n| a\\|b | 1 |'),
    '<table><thead><tr><th class="align-left">n</th><th class="align-right">v</th></tr></thead>' +
    '<tbody><tr><td class="align-left">a|b</td><td class="align-right">1</td></tr></tbody></table>');
});

test('citations', () => {
  const tree = parseMarkdown('Revenue grew [1][2], see [3, 4]. Not [a] nor [1](https://x.org).');
  const cites = [];
  const walk = (ns) => ns.forEach((n) => { if (n && n.tag === 'cite') cites.push(n.n); else if (n && n.children) walk(n.children); });
  walk(tree);
  assert.deepEqual(cites, [1, 2, 3, 4]);
  assert.equal(textOf(tree), 'Revenue grew [1][2], see [3][4]. Not [a] nor 1.');
});

test('blockquote and rule', () => {
  assert.equal(html('> q\n\n---'), '<blockquote><p>q</p></blockquote><hr>');
});
