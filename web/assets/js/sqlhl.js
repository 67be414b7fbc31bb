// A small SQL tokenizer for syntax highlighting. DOM-free: it returns tokens
// whose texts, joined, are exactly the input; the page turns them into text
// nodes inside <span class="tok-…">, so nothing is ever parsed as HTML.

const KEYWORDS = new Set(`
  select from where group by order having limit offset as and or not in is null
  like ilike between case when then else end join left right full inner outer cross
  on using union all distinct intersect except with recursive insert into values
  update set delete create table view drop alter asc desc nulls first last true false
  over partition rows range unbounded preceding following current row window filter
  qualify cast try_cast interval explain describe show summarize pivot unpivot
  lateral natural exists any some array struct map replace exclude columns
  date timestamp time integer bigint smallint tinyint hugeint double float real
  decimal numeric varchar text boolean blob uuid copy attach detach install load pragma
  returning primary key default if only within
`.split(/\s+/).filter(Boolean));

// Keywords that are also function names when followed by '('.
const FUNCTION_LIKE = new Set(['cast', 'try_cast', 'replace', 'struct', 'map', 'array', 'date', 'timestamp', 'time', 'left', 'right', 'if', 'columns', 'exclude']);

/**
 * @typedef {{type: 'kw'|'fn'|'id'|'qid'|'str'|'num'|'com'|'op'|'ws'|'other', text: string}} Token
 * @param {string} src
 * @returns {Token[]}
 */
export function tokenizeSQL(src) {
  const out = [];
  const s = String(src ?? '');
  let i = 0;
  const push = (type, text) => {
    const last = out[out.length - 1];
    if (last && last.type === type && (type === 'ws' || type === 'other')) last.text += text;
    else out.push({ type, text });
  };
  while (i < s.length) {
    const c = s[i];
    const rest = s.slice(i);
    let m;
    if (/\s/.test(c)) {
      m = /^\s+/.exec(rest);
      push('ws', m[0]);
    } else if (rest.startsWith('--')) {
      const nl = s.indexOf('\n', i);
      const end = nl === -1 ? s.length : nl;
      push('com', s.slice(i, end));
      i = end;
      continue;
    } else if (rest.startsWith('/*')) {
      const close = s.indexOf('*/', i + 2);
      const end = close === -1 ? s.length : close + 2;
      push('com', s.slice(i, end));
      i = end;
      continue;
    } else if (c === "'" || c === '"') {
      let j = i + 1;
      while (j < s.length) {
        if (s[j] === c) {
          if (s[j + 1] === c) { j += 2; continue; }
          j++;
          break;
        }
        j++;
      }
      push(c === "'" ? 'str' : 'qid', s.slice(i, j));
      i = j;
      continue;
    } else if ((m = /^(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)/.exec(rest)) && !/[A-Za-z_]/.test(s[i - 1] ?? '')) {
      push('num', m[0]);
    } else if ((m = /^[A-Za-z_][A-Za-z0-9_$]*/.exec(rest))) {
      const word = m[0];
      const after = s.slice(i + word.length);
      const call = /^\s*\(/.test(after);
      const lower = word.toLowerCase();
      if (KEYWORDS.has(lower) && !(call && FUNCTION_LIKE.has(lower))) push('kw', word);
      else if (call) push('fn', word);
      else push('id', word);
    } else if ((m = /^(?:<>|<=|>=|!=|::|\|\||[-+*/%=<>(),;.|&^~!])/.exec(rest))) {
      push('op', m[0]);
    } else {
      m = { 0: c };
      push('other', c);
    }
    i += m[0].length;
  }
  return out;
}

/** Pretty enough SQL for display: trims and leaves the query's own layout. */
export function displaySQL(q) {
  return String(q ?? '').replace(/^\s*\n/, '').replace(/\s+$/, '');
}
