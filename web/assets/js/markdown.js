// A small, safe Markdown renderer for model output.
//
// parseMarkdown turns text into a tree of plain objects ({tag, attrs, children}
// with strings for text). The tree can only hold the tags and attributes listed
// in ALLOWED below; link targets are checked to be http(s). The page builds DOM
// nodes from it with createElement/createTextNode (see dom.js), so raw HTML in
// the input is always shown as text: no string is ever parsed as HTML.
//
// Supported: ATX headings, paragraphs (single newlines are line breaks),
// **bold**, *italic*, ~~strike~~, `code`, fenced code blocks (SQL highlighted),
// bullet and numbered lists (nested), block quotes, rules, GFM pipe tables,
// [links](https://…), <https://…> and bare http(s) URLs, and citation markers
// [1] / [1, 2] (tag "cite", resolved against an answer's sources by the page).

import { tokenizeSQL } from './sqlhl.js';

/** Tags a tree may hold, each with the attributes it may carry. */
export const ALLOWED = {
  p: [], h1: [], h2: [], h3: [], h4: [], h5: [], h6: [],
  strong: [], em: [], del: [], code: ['class'], pre: [], br: [], hr: [],
  ul: [], ol: ['start'], li: [], blockquote: [],
  a: ['href', 'title'], span: ['class'],
  table: [], thead: [], tbody: [], tr: [], th: ['class'], td: ['class'],
  cite: [],
};

const el = (tag, attrs, children) => ({ tag, attrs: attrs || null, children: children || [] });

/**
 * safeHref returns a normalised http(s) URL, or null for anything else
 * (javascript:, data:, relative paths, URLs with control characters…).
 * @param {string} href
 */
export function safeHref(href) {
  const s = String(href ?? '').trim();
  if (!/^https?:\/\//i.test(s) || /[\u0000-\u0020\u007f<>"`]/.test(s)) return null;
  try {
    const u = new URL(s);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') return null;
    return u.href;
  } catch {
    return null;
  }
}

/** @param {string} src @returns {Array<object|string>} */
export function parseMarkdown(src) {
  const lines = String(src ?? '')
    .replace(/\r\n?/g, '\n')
    .split('\n')
    .map((l) => l.replace(/^[ \t]+/, (ws) => ws.replace(/\t/g, '    ')));
  return parseBlocks(lines);
}

const LIST_RE = /^( *)([-*+]|\d{1,9}[.)])(?:([ \t]+)(.*))?$/;
const FENCE_RE = /^( {0,3})(`{3,}|~{3,})[ \t]*([^`\s]*)[^`]*$/;
const HEADING_RE = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
const HR_RE = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
const QUOTE_RE = /^ {0,3}>/;
const blank = (l) => /^\s*$/.test(l);
const indentOf = (l) => /^ */.exec(l)[0].length;
const stripIndent = (l, n) => l.replace(new RegExp(`^ {0,${Math.max(0, n)}}`), '');

function startsBlock(line, next) {
  return FENCE_RE.test(line) || HEADING_RE.test(line) || HR_RE.test(line) || QUOTE_RE.test(line) ||
    LIST_RE.test(line) || (next !== undefined && line.includes('|') && isDelimiterRow(next));
}

function parseBlocks(lines) {
  const out = [];
  let para = [];
  const flush = () => {
    if (para.length) {
      out.push(el('p', null, parseInline(para.map((l) => l.trim()).join('\n'))));
      para = [];
    }
  };
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    let m;
    if (blank(line)) {
      flush();
      i++;
      continue;
    }
    if ((m = FENCE_RE.exec(line))) {
      flush();
      const indent = m[1].length;
      const fence = m[2];
      const close = new RegExp(`^ {0,3}${fence[0] === '`' ? '`' : '~'}{${fence.length},}[ \\t]*$`);
      const body = [];
      i++;
      while (i < lines.length && !close.test(lines[i])) body.push(stripIndent(lines[i++], indent));
      i++; // the closing fence, if any (a stream may not have sent it yet)
      out.push(codeBlock(body.join('\n'), m[3]));
      continue;
    }
    if ((m = HEADING_RE.exec(line))) {
      flush();
      out.push(el(`h${m[1].length}`, null, parseInline(m[2] ?? '')));
      i++;
      continue;
    }
    if (HR_RE.test(line)) {
      flush();
      out.push(el('hr'));
      i++;
      continue;
    }
    if (line.includes('|') && i + 1 < lines.length && isDelimiterRow(lines[i + 1])) {
      const header = splitRow(line);
      const aligns = splitRow(lines[i + 1]).map(alignOf);
      if (header.length === aligns.length) {
        flush();
        const cell = (tag, text, k) => el(tag, aligns[k] ? { class: `align-${aligns[k]}` } : null, parseInline(text));
        const thead = el('thead', null, [el('tr', null, header.map((h, k) => cell('th', h, k)))]);
        const rows = [];
        i += 2;
        while (i < lines.length && !blank(lines[i]) && lines[i].includes('|') && !FENCE_RE.test(lines[i])) {
          const cells = splitRow(lines[i]);
          rows.push(el('tr', null, header.map((_, k) => cell('td', cells[k] ?? '', k))));
          i++;
        }
        out.push(el('table', null, rows.length ? [thead, el('tbody', null, rows)] : [thead]));
        continue;
      }
    }
    if (QUOTE_RE.test(line)) {
      flush();
      const body = [];
      while (i < lines.length && QUOTE_RE.test(lines[i])) body.push(lines[i++].replace(/^ {0,3}> ?/, ''));
      out.push(el('blockquote', null, parseBlocks(body)));
      continue;
    }
    if (LIST_RE.test(line)) {
      flush();
      const [list, next] = parseList(lines, i);
      out.push(list);
      i = next;
      continue;
    }
    para.push(line);
    i++;
  }
  flush();
  return out;
}

function parseList(lines, start) {
  const first = LIST_RE.exec(lines[start]);
  const base = first[1].length;
  const ordered = /\d/.test(first[2]);
  const marker = ordered ? first[2].slice(-1) : first[2];
  const sameList = (m) => m && m[1].length <= base + 1 && (ordered ? /\d/.test(m[2]) && m[2].slice(-1) === marker : m[2] === marker);
  const items = [];
  let cur = null;
  let loose = false;
  let sawBlank = false;
  let i = start;
  while (i < lines.length) {
    const line = lines[i];
    const m = LIST_RE.exec(line);
    if (sameList(m)) {
      if (cur) items.push(cur);
      if (sawBlank) loose = true;
      const pad = m[3] ? Math.min(m[3].length, 4) : 1;
      cur = { lines: [m[4] ?? ''], offset: m[1].length + m[2].length + pad };
      sawBlank = false;
      i++;
      continue;
    }
    if (blank(line)) {
      let j = i + 1;
      while (j < lines.length && blank(lines[j])) j++;
      if (j < lines.length && (sameList(LIST_RE.exec(lines[j])) || indentOf(lines[j]) > base)) {
        sawBlank = true;
        cur.lines.push('');
        i++;
        continue;
      }
      break;
    }
    if (indentOf(line) > base) {
      cur.lines.push(stripIndent(line, cur.offset));
      i++;
      continue;
    }
    if (!sawBlank && !startsBlock(line, lines[i + 1])) { // lazy continuation of the item's text
      cur.lines.push(line.trim());
      i++;
      continue;
    }
    break;
  }
  if (cur) items.push(cur);
  const lis = items.map((it) => {
    while (it.lines.length && blank(it.lines[it.lines.length - 1])) it.lines.pop();
    // Two blocks of the item itself separated by a blank line make the list loose.
    it.lines.forEach((l, k) => {
      if (k > 0 && blank(it.lines[k - 1]) && !blank(l) && indentOf(l) === 0 && !LIST_RE.test(l)) loose = true;
    });
    return parseBlocks(it.lines);
  });
  const out = lis.map((children) => el('li', null, loose ? children : children.flatMap((c) => (c.tag === 'p' ? c.children : [c]))));
  const startNum = ordered ? parseInt(first[2], 10) : 1;
  return [el(ordered ? 'ol' : 'ul', ordered && startNum !== 1 ? { start: String(startNum) } : null, out), i];
}

function codeBlock(code, lang) {
  const l = String(lang || '').toLowerCase().replace(/[^a-z0-9_+-]/g, '').slice(0, 20);
  let children = [code];
  if (/^(sql|duckdb|postgres|postgresql|sqlite|mysql)$/.test(l)) {
    children = tokenizeSQL(code).map((t) => (t.type === 'ws' || t.type === 'other' ? t.text : el('span', { class: `tok-${t.type}` }, [t.text])));
  }
  return el('pre', null, [el('code', l ? { class: `lang-${l}` } : null, children)]);
}

function isDelimiterRow(line) {
  return line.includes('|') && /^ {0,3}\|?[ \t]*:?-+:?[ \t]*(\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$/.test(line);
}

function splitRow(line) {
  let s = line.trim();
  if (s.startsWith('|')) s = s.slice(1);
  if (s.endsWith('|') && !s.endsWith('\\|')) s = s.slice(0, -1);
  const cells = [];
  let cur = '';
  let inCode = false;
  for (let k = 0; k < s.length; k++) {
    const c = s[k];
    if (c === '\\' && s[k + 1] === '|') {
      cur += '|';
      k++;
    } else if (c === '`') {
      inCode = !inCode;
      cur += c;
    } else if (c === '|' && !inCode) {
      cells.push(cur.trim());
      cur = '';
    } else {
      cur += c;
    }
  }
  cells.push(cur.trim());
  return cells;
}

function alignOf(cell) {
  const l = cell.startsWith(':');
  const r = cell.endsWith(':');
  return l && r ? 'center' : r ? 'right' : l ? 'left' : null;
}

const PUNCT = /[!"#$%&'()*+,\-./:;<=>?@[\\\]^_`{|}~]/;
const WORD = /[\p{L}\p{N}]/u;

/** @param {string} s @returns {Array<object|string>} */
export function parseInline(s) {
  s = String(s ?? '');
  const out = [];
  let buf = '';
  const flushText = () => {
    if (buf) out.push(buf);
    buf = '';
  };
  const node = (n) => {
    flushText();
    if (Array.isArray(n)) out.push(...n);
    else out.push(n);
  };
  let i = 0;
  while (i < s.length) {
    const c = s[i];
    if (c === '\\' && PUNCT.test(s[i + 1] ?? '')) {
      buf += s[i + 1];
      i += 2;
      continue;
    }
    if (c === '\n' || (c === '\\' && s[i + 1] === '\n')) {
      buf = buf.replace(/ +$/, '');
      node(el('br'));
      i += c === '\n' ? 1 : 2;
      while (s[i] === ' ') i++;
      continue;
    }
    if (c === '`') {
      const run = /^`+/.exec(s.slice(i))[0];
      const close = findBacktickRun(s, i + run.length, run.length);
      if (close !== -1) {
        let code = s.slice(i + run.length, close).replace(/\n/g, ' ');
        if (/^ .* $/.test(code) && code.trim()) code = code.slice(1, -1);
        node(el('code', null, [code]));
        i = close + run.length;
        continue;
      }
      buf += run;
      i += run.length;
      continue;
    }
    if (c === '!' && s[i + 1] === '[') {
      // Images are never loaded (no external requests): shown as a link.
      const link = parseLink(s, i + 1);
      if (link) {
        node(makeLink(link.label ? parseInline(link.label) : [link.href], link.href, link.title));
        i = link.end;
        continue;
      }
    }
    if (c === '[') {
      const link = parseLink(s, i);
      if (link) {
        node(makeLink(parseInline(link.label), link.href, link.title));
        i = link.end;
        continue;
      }
      const m = /^\[(\d{1,3}(?:[ \t]*,[ \t]*\d{1,3})*)\]/.exec(s.slice(i, i + 40));
      if (m && s[i + m[0].length] !== '(') {
        const nums = m[1].split(',').map((x) => parseInt(x.trim(), 10));
        node(nums.map((n) => ({ tag: 'cite', attrs: null, n, children: [`[${n}]`] })));
        i += m[0].length;
        continue;
      }
      buf += c;
      i++;
      continue;
    }
    if (c === '<') {
      const m = /^<(https?:\/\/[^\s<>]+)>/i.exec(s.slice(i));
      if (m) {
        node(makeLink([m[1]], m[1]));
        i += m[0].length;
        continue;
      }
    }
    if ((c === 'h' || c === 'H') && !WORD.test(s[i - 1] ?? '')) {
      const m = /^https?:\/\/[^\s<>"]+/i.exec(s.slice(i));
      if (m) {
        const url = trimURL(m[0]);
        node(makeLink([url], url));
        i += url.length;
        continue;
      }
    }
    if (c === '*' || c === '_' || c === '~') {
      const r = parseEmphasis(s, i);
      if (r) {
        node(r.node);
        i = r.end;
        continue;
      }
      const run = s.slice(i).match(c === '*' ? /^\*+/ : c === '_' ? /^_+/ : /^~+/)[0];
      buf += run;
      i += run.length;
      continue;
    }
    buf += c;
    i++;
  }
  flushText();
  return out;
}

function findBacktickRun(s, from, n) {
  let j = from;
  while (j < s.length) {
    const k = s.indexOf('`', j);
    if (k === -1) return -1;
    let e = k;
    while (s[e] === '`') e++;
    if (e - k === n) return k;
    j = e;
  }
  return -1;
}

function parseLink(s, i) {
  // [label](destination "title")
  let depth = 0;
  let j = i;
  for (; j < s.length; j++) {
    if (s[j] === '\\') { j++; continue; }
    if (s[j] === '[') depth++;
    else if (s[j] === ']' && --depth === 0) break;
    else if (s[j] === '\n' && s[j + 1] === '\n') return null;
  }
  if (j >= s.length || s[j + 1] !== '(') return null;
  const label = s.slice(i + 1, j);
  let k = j + 2;
  while (s[k] === ' ') k++;
  let href = '';
  if (s[k] === '<') {
    const e = s.indexOf('>', k);
    if (e === -1) return null;
    href = s.slice(k + 1, e);
    k = e + 1;
  } else {
    let par = 0;
    const st = k;
    for (; k < s.length; k++) {
      const c = s[k];
      if (c === '\\') { k++; continue; }
      if (/\s/.test(c)) break;
      if (c === '(') par++;
      else if (c === ')') {
        if (par === 0) break;
        par--;
      }
    }
    href = s.slice(st, k);
  }
  while (s[k] === ' ') k++;
  let title = null;
  if (s[k] === '"' || s[k] === "'") {
    const q = s[k];
    const e = s.indexOf(q, k + 1);
    if (e === -1) return null;
    title = s.slice(k + 1, e);
    k = e + 1;
    while (s[k] === ' ') k++;
  }
  if (s[k] !== ')') return null;
  return { label, href, title, end: k + 1 };
}

function makeLink(children, href, title) {
  const safe = safeHref(href);
  if (!safe) return el('span', null, children); // not a link: only its text is kept
  const attrs = { href: safe };
  if (title) attrs.title = String(title);
  return el('a', attrs, children);
}

function trimURL(url) {
  let u = url;
  for (;;) {
    const last = u[u.length - 1];
    if (/[.,;:!?'*_~]/.test(last)) u = u.slice(0, -1);
    else if (last === ')' && (u.match(/\(/g) || []).length < (u.match(/\)/g) || []).length) u = u.slice(0, -1);
    else break;
  }
  return u;
}

function parseEmphasis(s, i) {
  const c = s[i];
  let run = 0;
  while (s[i + run] === c) run++;
  const prev = s[i - 1] ?? ' ';
  const next = s[i + run] ?? ' ';
  if (/\s/.test(next)) return null; // an opener must touch the text it opens
  if (c === '~') {
    if (run !== 2) return null;
  } else if (c === '_' && WORD.test(prev)) {
    return null; // snake_case_names stay as they are
  }
  const k = c === '~' ? 2 : Math.min(run, 3);
  if (run !== k) return null;
  const close = findCloser(s, i + k, c, k);
  if (close === -1) return null;
  const children = parseInline(s.slice(i + k, close));
  let n;
  if (c === '~') n = el('del', null, children);
  else if (k === 1) n = el('em', null, children);
  else if (k === 2) n = el('strong', null, children);
  else n = el('strong', null, [el('em', null, children)]);
  return { node: n, end: close + k };
}

function findCloser(s, from, c, k) {
  let j = from;
  while (j < s.length) {
    const ch = s[j];
    if (ch === '\\') {
      j += 2;
      continue;
    }
    if (ch === '`') {
      let e = j;
      while (s[e] === '`') e++;
      const close = findBacktickRun(s, e, e - j);
      j = close === -1 ? e : close + (e - j);
      continue;
    }
    if (ch === c) {
      let r = 0;
      while (s[j + r] === c) r++;
      if (r === k && j > from && !/\s/.test(s[j - 1]) && !(c === '_' && WORD.test(s[j + r] ?? ''))) return j;
      j += r;
      continue;
    }
    j++;
  }
  return -1;
}

/** The plain text of a tree (for copying and tests). */
export function textOf(nodes) {
  return nodes.map((n) => (typeof n === 'string' ? n : n.tag === 'br' ? '\n' : textOf(n.children || []))).join('');
}

const ESC = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ESC[c]);
const VOID = new Set(['br', 'hr']);

/**
 * toHTML serialises a tree with everything escaped. The page does not use it
 * (it builds DOM nodes); it exists so tests can read what a tree says.
 */
export function toHTML(nodes) {
  return nodes.map((n) => {
    if (typeof n === 'string') return esc(n);
    if (n.tag === 'cite') return `<sup class="cite">[${Number(n.n)}]</sup>`;
    const allowed = ALLOWED[n.tag];
    if (!allowed) return esc(textOf([n]));
    let attrs = '';
    for (const [k, v] of Object.entries(n.attrs || {})) {
      if (!allowed.includes(k)) continue;
      if (k === 'href' && !safeHref(v)) continue;
      attrs += ` ${k}="${esc(v)}"`;
    }
    if (n.tag === 'a') attrs += ' rel="noopener noreferrer nofollow" target="_blank"';
    if (VOID.has(n.tag)) return `<${n.tag}${attrs}>`;
    return `<${n.tag}${attrs}>${toHTML(n.children || [])}</${n.tag}>`;
  }).join('');
}
