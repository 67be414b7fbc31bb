// DOM helpers. Everything the page shows is built with createElement and text
// nodes: no string is ever parsed as HTML, so neither model output nor data can inject
// markup.

import { ALLOWED, safeHref } from './markdown.js';

/**
 * h builds an element: h('button.primary', {onclick, testid: 'send-button'}, 'Send').
 * Attributes: class, testid (→ data-testid), on* (listeners), dataset (object),
 * style (object), and any other attribute as a string; false/null are skipped.
 */
export function h(spec, attrs, ...children) {
  const [tag, ...classes] = spec.split('.');
  const e = document.createElement(tag || 'div');
  if (classes.length) e.className = classes.join(' ');
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'class') e.className = [e.className, v].filter(Boolean).join(' ');
      else if (k === 'testid') e.dataset.testid = v;
      else if (k === 'dataset') Object.assign(e.dataset, v);
      else if (k === 'style') Object.assign(e.style, v);
      else if (k.startsWith('on') && typeof v === 'function') e.addEventListener(k.slice(2), v);
      else if (k === 'text') e.textContent = v;
      else if (v === true) e.setAttribute(k, '');
      else e.setAttribute(k, String(v));
    }
  }
  append(e, children);
  return e;
}

/** append adds children (nodes, strings, arrays; null skipped). */
export function append(parent, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    parent.append(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
  }
  return parent;
}

export function clear(e) {
  while (e.firstChild) e.firstChild.remove();
  return e;
}

const SVG = 'http://www.w3.org/2000/svg';
const ICONS = {
  plus: 'M12 5v14M5 12h14',
  send: 'M5 12h14M13 6l6 6-6 6',
  stop: 'M7 7h10v10H7z',
  trash: 'M4 7h16M10 11v6M14 11v6M6 7l1 13h10l1-13M9 7V4h6v3',
  edit: 'M4 20h4L19 9l-4-4L4 16v4zM13.5 6.5l4 4',
  data: 'M4 6c0-1.7 3.6-3 8-3s8 1.3 8 3-3.6 3-8 3-8-1.3-8-3zM4 6v12c0 1.7 3.6 3 8 3s8-1.3 8-3V6M4 12c0 1.7 3.6 3 8 3s8-1.3 8-3',
  menu: 'M4 6h16M4 12h16M4 18h16',
  close: 'M6 6l12 12M18 6L6 18',
  chevron: 'M9 6l6 6-6 6',
  download: 'M12 4v11M7 10l5 5 5-5M5 20h14',
  chart: 'M4 20V4M4 20h16M8 16v-5M12 16V8M16 16v-8',
  table: 'M4 5h16v14H4zM4 10h16M4 15h16M10 5v14',
  file: 'M6 3h8l4 4v14H6zM14 3v4h4',
  link: 'M10 14a4 4 0 0 0 5.7 0l3-3a4 4 0 0 0-5.7-5.7l-1 1M14 10a4 4 0 0 0-5.7 0l-3 3a4 4 0 0 0 5.7 5.7l1-1',
  upload: 'M12 20V9M7 14l5-5 5 5M5 4h14',
  check: 'M5 12l5 5 9-10',
  alert: 'M12 8v5M12 16.5v.5M10.3 3.9L2.6 17.5A2 2 0 0 0 4.3 20.5h15.4a2 2 0 0 0 1.7-3L13.7 3.9a2 2 0 0 0-3.4 0z',
  search: 'M11 18a7 7 0 1 0 0-14 7 7 0 0 0 0 14zM20 20l-4-4',
  key: 'M15 7a4 4 0 1 1-3.9 5H4v3h3v3h3v-3h1.1A4 4 0 0 1 15 7z',
  logout: 'M10 5H5v14h5M15 8l4 4-4 4M19 12H9',
  copy: 'M9 9h10v11H9zM5 15V4h10',
  user: 'M12 12a4 4 0 1 0 0-8 4 4 0 0 0 0 8zM4 21c0-4 3.6-6 8-6s8 2 8 6',
  users: 'M9 11a3.5 3.5 0 1 0 0-7 3.5 3.5 0 0 0 0 7zM2 20c0-3.5 3-5.5 7-5.5s7 2 7 5.5M16 4.2a3.5 3.5 0 0 1 0 6.6M18 14.8c2.4.6 4 2.3 4 5.2',
  share: 'M16 8a3 3 0 1 0 0-6 3 3 0 0 0 0 6zM8 15a3 3 0 1 0 0-6 3 3 0 0 0 0 6zM16 22a3 3 0 1 0 0-6 3 3 0 0 0 0 6zM10.6 13.5l2.8 1.6M13.4 6.9l-2.8 1.6',
  shield: 'M12 3l8 3v6c0 4.5-3.4 8.2-8 9-4.6-.8-8-4.5-8-9V6l8-3z',
  lock: 'M6 11h12v10H6zM8 11V7a4 4 0 0 1 8 0v4',
};

/** icon returns a 24×24 stroked SVG icon. */
export function icon(name, size = 18) {
  const s = document.createElementNS(SVG, 'svg');
  s.setAttribute('viewBox', '0 0 24 24');
  s.setAttribute('width', String(size));
  s.setAttribute('height', String(size));
  s.setAttribute('aria-hidden', 'true');
  s.setAttribute('class', 'icon');
  const p = document.createElementNS(SVG, 'path');
  p.setAttribute('d', ICONS[name] || '');
  s.append(p);
  return s;
}

/**
 * renderTree builds DOM nodes from a Markdown tree (markdown.js). Only allowed
 * tags and attributes are created; links are re-checked and open in a new tab
 * with rel=noopener. cite(n) renders a citation marker.
 */
export function renderTree(nodes, cite) {
  const frag = document.createDocumentFragment();
  for (const n of nodes) {
    if (typeof n === 'string') {
      frag.append(document.createTextNode(n));
      continue;
    }
    if (n.tag === 'cite') {
      frag.append(cite ? cite(n.n) : document.createTextNode(`[${n.n}]`));
      continue;
    }
    const allowed = ALLOWED[n.tag];
    if (!allowed) {
      frag.append(renderTree(n.children || [], cite));
      continue;
    }
    const e = document.createElement(n.tag);
    for (const [k, v] of Object.entries(n.attrs || {})) {
      if (!allowed.includes(k)) continue;
      if (k === 'href') {
        const href = safeHref(v);
        if (!href) continue;
        e.setAttribute('href', href);
        e.setAttribute('target', '_blank');
        e.setAttribute('rel', 'noopener noreferrer nofollow');
      } else {
        e.setAttribute(k, String(v));
      }
    }
    e.append(renderTree(n.children || [], cite));
    frag.append(e);
  }
  return frag;
}

/** downloadText saves text as a file through a Blob URL. */
export function downloadText(text, filename, type = 'text/csv;charset=utf-8') {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = h('a', { href: url, download: filename, style: { display: 'none' } });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

export function formatBytes(n) {
  if (!Number.isFinite(n)) return '';
  const u = ['B', 'KB', 'MB', 'GB', 'TB'];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) {
    n /= 1024;
    i++;
  }
  return `${n >= 10 || i === 0 ? Math.round(n) : n.toFixed(1)} ${u[i]}`;
}

export function formatCount(n) {
  return Number.isFinite(Number(n)) ? Number(n).toLocaleString('en-US') : String(n ?? '');
}

export function formatMS(ms) {
  const n = Number(ms);
  if (!Number.isFinite(n)) return '';
  if (n < 1) return '<1 ms';
  if (n < 1000) return `${Math.round(n)} ms`;
  return `${(n / 1000).toFixed(n < 10000 ? 2 : 1)} s`;
}
