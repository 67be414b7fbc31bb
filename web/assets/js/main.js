// datachat's web page: sign-in, conversations, chat over the WebSocket, the
// data panel and the confirmation dialog. Plain ES modules, no build step.

import { Api, ApiError, listOf } from './api.js';
import { ChatSocket, socketURL, socketProtocols } from './socket.js';
import { h, icon, clear } from './dom.js';
import { AssistantView, userMessage, userSQL, errorBlock } from './chat.js';
import { DataPanel } from './panel.js';
import { Examples } from './verify.js';
import { ConfirmDialog } from './confirm.js';
import { sourceLabel } from './cards.js';

const KEY_STORAGE = 'datachat.key';
const DEFAULT_TITLE = 'New conversation';
const $ = (id) => document.getElementById(id);

const state = {
  api: null,
  conversations: [],
  current: null, // {id, title, …}
  messageCount: 0,
  socket: null,
  turn: null, // the AssistantView receiving events
  streaming: false,
  stopping: null, // timer while waiting for chat_complete after Stop
  pending: null, // the confirmation waiting for an answer
  openGen: 0,
};

let panel;
let dialog;
let examples;

// ---------- sign-in ----------

function readKeyFromFragment() {
  const hash = location.hash.replace(/^#/, '');
  if (!hash) return null;
  const params = new URLSearchParams(hash);
  const key = params.get('key');
  if (!key) return null;
  params.delete('key');
  const rest = params.toString();
  history.replaceState(null, '', location.pathname + location.search + (rest ? `#${rest}` : ''));
  return key.trim();
}

function storedKey() {
  try {
    return sessionStorage.getItem(KEY_STORAGE);
  } catch {
    return null;
  }
}

function storeKey(key) {
  try {
    if (key) sessionStorage.setItem(KEY_STORAGE, key);
    else sessionStorage.removeItem(KEY_STORAGE);
  } catch {
    /* storage disabled: the key lives for this page only */
  }
}

function showSignIn(message) {
  $('app').hidden = true;
  $('signin').hidden = false;
  const err = $('signin-error');
  err.textContent = message || '';
  err.hidden = !message;
  const input = $('api-key-input');
  input.value = '';
  input.focus();
}

async function signIn(key, { fromForm = false } = {}) {
  const api = new Api(key, () => signOut('Your API key is no longer accepted. Sign in again.'));
  const btn = $('api-key-submit');
  btn.disabled = true;
  try {
    const data = await api.request('GET', '/api/conversations');
    storeKey(key);
    state.api = api;
    state.conversations = listOf(data, 'conversations');
    startApp();
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) {
      storeKey(null);
      showSignIn(fromForm ? 'That API key was not accepted. Check it and try again.' : 'The saved API key was not accepted. Sign in again.');
    } else {
      // The server may just be restarting: keep the key so "Sign in" retries.
      showSignIn(err.message || 'Sign-in failed.');
      $('api-key-input').value = key;
    }
  } finally {
    btn.disabled = false;
  }
}

function signOut(message) {
  storeKey(null);
  closeSocket();
  dialog && dialog.dismiss();
  state.api = null;
  state.current = null;
  state.conversations = [];
  history.replaceState(null, '', location.pathname + location.search);
  showSignIn(message || '');
}

// ---------- app shell ----------

let started = false;

function startApp() {
  $('signin').hidden = true;
  $('app').hidden = false;
  if (!started) {
    started = true;
    examples = new Examples(() => state.api);
    panel = new DataPanel({
      api: () => state.api,
      ensureConversation,
      examples,
      onChange: ({ datasets, documents }) => {
        const n = datasets + documents;
        const badge = $('data-count');
        badge.textContent = n ? String(n) : '';
        badge.hidden = !n;
      },
    });
    dialog = new ConfirmDialog(answerConfirmation);
    wireShell();
  }
  examples.load();
  renderConversations();
  const id = new URLSearchParams(location.hash.replace(/^#/, '')).get('c');
  if (id && state.conversations.some((c) => c.id === id)) openConversation(id);
  else showEmpty();
}

function wireShell() {
  $('new-conversation').addEventListener('click', () => newConversation());
  $('sign-out').addEventListener('click', () => signOut('Signed out.'));
  $('composer').addEventListener('submit', (e) => {
    e.preventDefault();
    send();
  });
  $('sql-mode').addEventListener('click', () => setSQLMode(!state.sqlMode));
  const input = $('chat-input');
  input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing && !e.altKey && !e.ctrlKey && !e.metaKey) {
      e.preventDefault();
      send();
    }
  });
  input.addEventListener('input', autoGrow);
  $('stop-button').addEventListener('click', stop);
  document.addEventListener('keydown', (e) => {
    if (e.key !== 'Escape' || e.defaultPrevented) return;
    if (dialog.isOpen) return; // the dialog closes itself
    if (!$('popover').hidden) {
      hidePopover();
      return;
    }
    if (state.streaming) {
      e.preventDefault();
      stop();
      return;
    }
    closeDrawers();
  });
  $('open-sidebar').addEventListener('click', () => toggleDrawer('sidebar'));
  $('open-data').addEventListener('click', () => toggleDrawer('datapanel'));
  $('close-data').addEventListener('click', () => closeDrawers());
  $('close-sidebar').addEventListener('click', () => closeDrawers());
  $('scrim').addEventListener('click', () => closeDrawers());
  $('conv-title').addEventListener('click', () => state.current && renameInline(state.current, $('conv-title')));
  document.addEventListener('click', (e) => {
    const pop = $('popover');
    if (!pop.hidden && !pop.contains(e.target)) hidePopover();
  });
  document.addEventListener('visibilitychange', () => {
    if (!document.hidden && state.socket) state.socket.reconnectNow();
  });
  window.addEventListener('online', () => state.socket && state.socket.reconnectNow());
  wireDragAndDrop();
  for (const s of document.querySelectorAll('.suggestion')) {
    s.addEventListener('click', () => {
      input.value = s.dataset.q || s.textContent;
      autoGrow();
      input.focus();
    });
  }
}

function wireDragAndDrop() {
  let depth = 0;
  const hasFiles = (e) => [...(e.dataTransfer?.types || [])].includes('Files');
  window.addEventListener('dragenter', (e) => {
    if (!hasFiles(e) || $('app').hidden) return;
    depth++;
    document.body.classList.add('dragging');
  });
  window.addEventListener('dragleave', () => {
    depth = Math.max(0, depth - 1);
    if (!depth) document.body.classList.remove('dragging');
  });
  window.addEventListener('dragover', (e) => {
    if (hasFiles(e)) e.preventDefault();
  });
  window.addEventListener('drop', (e) => {
    if (!hasFiles(e)) return;
    e.preventDefault();
    depth = 0;
    document.body.classList.remove('dragging');
    if ($('app').hidden) return;
    openDrawerIfNarrow('datapanel');
    panel.uploadAll([...e.dataTransfer.files], null);
  });
}

function isNarrow(which) {
  return getComputedStyle($(which)).position === 'fixed';
}

function toggleDrawer(which) {
  const el = $(which);
  if (!isNarrow(which)) {
    // Wide screens show the data panel beside the chat; the button hides it.
    if (which === 'datapanel') document.body.classList.toggle('data-collapsed');
    return;
  }
  const open = !el.classList.contains('open');
  closeDrawers();
  if (open) {
    el.classList.add('open');
    $('scrim').hidden = false;
    const first = el.querySelector('input, button');
    if (first) first.focus({ preventScroll: true });
  }
}

function openDrawerIfNarrow(which) {
  if (!isNarrow(which)) document.body.classList.remove('data-collapsed');
  else if (!$(which).classList.contains('open')) toggleDrawer(which);
}

function closeDrawers() {
  $('sidebar').classList.remove('open');
  $('datapanel').classList.remove('open');
  $('scrim').hidden = true;
}

function autoGrow() {
  const input = $('chat-input');
  input.style.height = 'auto';
  input.style.height = `${Math.min(input.scrollHeight, 220)}px`;
}

function toast(message, kind = '') {
  const t = h(`div.toast-item.${kind || 'info'}`, { role: 'status' }, message);
  $('toast').append(t);
  setTimeout(() => t.classList.add('leaving'), 3500);
  setTimeout(() => t.remove(), 4000);
}

// ---------- conversations ----------

function relTime(iso) {
  const t = Date.parse(iso);
  if (!Number.isFinite(t)) return '';
  const s = (Date.now() - t) / 1000;
  if (s < 60) return 'just now';
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  if (s < 7 * 86400) return `${Math.floor(s / 86400)} d ago`;
  return new Date(t).toLocaleDateString();
}

function renderConversations() {
  const list = $('conversation-list');
  clear(list);
  const convs = [...state.conversations].sort((a, b) => String(b.updated_at || '').localeCompare(String(a.updated_at || '')));
  if (!convs.length) {
    list.append(h('li.conv-empty', null, 'No conversations yet.'));
    return;
  }
  for (const c of convs) {
    const active = state.current && state.current.id === c.id;
    const li = h('li.conv-item', {
      testid: 'conversation-item',
      class: active ? 'active' : null,
      dataset: { id: c.id },
      'aria-current': active ? 'true' : null,
    });
    const title = h('button.conv-open', { type: 'button', title: c.title },
      h('span.conv-title-text', null, c.title || DEFAULT_TITLE),
      h('span.conv-time', null, relTime(c.updated_at)));
    title.addEventListener('click', () => openConversation(c.id));
    const actions = h('span.conv-actions', null,
      h('button.icon-btn.small', { type: 'button', title: 'Rename', 'aria-label': `Rename ${c.title}`, onclick: (e) => { e.stopPropagation(); renameInline(c, title.querySelector('.conv-title-text')); } }, icon('edit', 15)),
      h('button.icon-btn.small.danger', { type: 'button', title: 'Delete', 'aria-label': `Delete ${c.title}`, onclick: (e) => { e.stopPropagation(); confirmDelete(c, li); } }, icon('trash', 15)));
    li.append(title, actions);
    list.append(li);
  }
}

function upsertConversation(c) {
  const i = state.conversations.findIndex((x) => x.id === c.id);
  if (i === -1) state.conversations.push(c);
  else state.conversations[i] = { ...state.conversations[i], ...c };
  if (state.current && state.current.id === c.id) {
    state.current = { ...state.current, ...c };
    $('conv-title').textContent = state.current.title;
  }
  renderConversations();
}

function renameInline(c, target) {
  const input = h('input.rename-input', { type: 'text', value: c.title, 'aria-label': 'Conversation title', maxlength: '200' });
  const host = target;
  const old = host.textContent;
  clear(host).append(input);
  host.classList.add('editing');
  input.focus();
  input.select();
  let done = false;
  const finish = async (save) => {
    if (done) return;
    done = true;
    host.classList.remove('editing');
    const title = input.value.trim();
    clear(host).append(save && title ? title : old);
    if (!save || !title || title === c.title) return;
    try {
      const updated = await state.api.patch(`/api/conversations/${encodeURIComponent(c.id)}`, { title });
      upsertConversation(updated && updated.id ? updated : { ...c, title });
    } catch (err) {
      clear(host).append(old);
      toast(err.message, 'error');
    }
  };
  input.addEventListener('click', (e) => e.stopPropagation());
  input.addEventListener('keydown', (e) => {
    e.stopPropagation();
    if (e.key === 'Enter') {
      e.preventDefault();
      finish(true);
    } else if (e.key === 'Escape') {
      e.preventDefault();
      finish(false);
    }
  });
  input.addEventListener('blur', () => finish(true));
}

function confirmDelete(c, li) {
  if (li.querySelector('.conv-confirm')) return;
  const bar = h('div.conv-confirm', null,
    h('span', null, 'Delete this conversation?'),
    h('button.btn.small.danger', { type: 'button', onclick: async (e) => {
      e.stopPropagation();
      try {
        await state.api.del(`/api/conversations/${encodeURIComponent(c.id)}`);
        state.conversations = state.conversations.filter((x) => x.id !== c.id);
        if (state.current && state.current.id === c.id) showEmpty();
        renderConversations();
      } catch (err) {
        toast(err.message, 'error');
      }
    } }, 'Delete'),
    h('button.btn.small', { type: 'button', onclick: (e) => { e.stopPropagation(); bar.remove(); } }, 'Cancel'));
  li.append(bar);
  bar.querySelector('button').focus();
}

async function newConversation(title) {
  try {
    const c = await state.api.post('/api/conversations', title ? { title } : {});
    state.conversations.push(c);
    await openConversation(c.id, { fresh: c });
    $('chat-input').focus();
    return c;
  } catch (err) {
    toast(err.message, 'error');
    throw err;
  }
}

/** ensureConversation returns the open conversation's id, creating one first if none is open. */
async function ensureConversation() {
  if (state.current) return state.current.id;
  const c = await newConversation();
  return c.id;
}

function setHash(id) {
  history.replaceState(null, '', location.pathname + location.search + (id ? `#c=${encodeURIComponent(id)}` : ''));
}

function showEmpty() {
  closeSocket();
  state.current = null;
  state.turn = null;
  state.pending = null;
  state.messageCount = 0;
  setStreaming(false);
  dialog.dismiss();
  setHash(null);
  $('conv-title').textContent = 'datachat';
  $('conv-title').classList.add('placeholder');
  clear($('message-list'));
  $('empty').hidden = false;
  panel.load(null);
  renderConversations();
}

async function openConversation(id, { fresh = null } = {}) {
  const gen = ++state.openGen;
  closeSocket();
  dialog.dismiss();
  hidePopover();
  closeDrawers();
  state.turn = null;
  state.pending = null;
  setStreaming(false);
  const known = state.conversations.find((c) => c.id === id);
  state.current = fresh || known || { id, title: '' };
  state.messageCount = 0;
  setHash(id);
  $('conv-title').textContent = state.current.title || DEFAULT_TITLE;
  $('conv-title').classList.remove('placeholder');
  renderConversations();
  const list = $('message-list');
  clear(list);
  $('empty').hidden = !fresh; // a new conversation shows the welcome
  panel.load(id);
  if (!fresh) {
    list.append(h('div.loading', null, h('span.spinner'), 'Loading conversation…'));
    let detail;
    try {
      detail = await state.api.get(`/api/conversations/${encodeURIComponent(id)}`);
    } catch (err) {
      if (gen !== state.openGen) return;
      clear(list);
      if (err.status === 404) {
        state.conversations = state.conversations.filter((c) => c.id !== id);
        toast('That conversation no longer exists.', 'error');
        showEmpty();
      } else {
        list.append(errorBlock({ message: err.message }));
      }
      return;
    }
    if (gen !== state.openGen) return;
    renderHistory(detail);
  }
  connectSocket(id);
}

function renderHistory(detail) {
  const list = $('message-list');
  clear(list);
  const { messages = [], pending_confirmation: pending, ...conv } = detail || {};
  if (conv.id) upsertConversation(conv);
  state.messageCount = messages.length;
  $('empty').hidden = messages.length > 0;
  let last = null;
  for (const m of messages) {
    const ran = m.role === 'user' && (m.tool_calls || []).find((tc) => tc.tool === 'execute_sql');
    if (ran) {
      let query = '';
      try {
        query = (typeof ran.args === 'string' ? JSON.parse(ran.args) : ran.args).query || '';
      } catch { /* keep it empty */ }
      list.append(userSQL(query, ran).el);
    } else if (m.role === 'user') list.append(userMessage(m.content));
    else if (m.role === 'assistant') {
      last = AssistantView.fromStored(m, viewContext());
      list.append(last.el);
    }
  }
  if (pending) {
    state.pending = pending;
    if (last && last.el.dataset.status === 'awaiting_confirmation') state.turn = last;
    else {
      state.turn = newAssistant();
      state.turn.awaiting();
    }
    dialog.show(pending);
  }
  scrollToBottom(true);
}

// ---------- chat ----------

function viewContext() {
  return {
    showSource,
    onDatasetLoaded: () => panel.refresh(),
    onReview: () => state.pending && dialog.show(state.pending),
    verify: { examples, conversationId: () => state.current && state.current.id },
  };
}

function newAssistant() {
  const v = new AssistantView(viewContext());
  $('message-list').append(v.el);
  $('empty').hidden = true;
  return v;
}

function connectSocket(id) {
  const sock = new ChatSocket({
    url: socketURL(location, id),
    protocols: socketProtocols(state.api.key),
    onEvent: (type, data) => {
      if (state.socket === sock) onEvent(type, data);
    },
    onState: (s, info) => {
      if (state.socket === sock) onSocketState(s, info);
    },
    onFailing: async () => {
      if (state.socket !== sock) return;
      try {
        await state.api.get(`/api/conversations/${encodeURIComponent(id)}`);
      } catch (err) {
        if (state.socket !== sock) return;
        if (err.status === 404) {
          state.conversations = state.conversations.filter((c) => c.id !== id);
          toast('That conversation no longer exists.', 'error');
          showEmpty();
        }
        // 401 signs out through the Api's handler.
      }
    },
  });
  state.socket = sock;
  sock.connect();
}

function closeSocket() {
  const s = state.socket;
  state.socket = null;
  if (s) s.close();
  setConn('');
}

function setConn(text, kind = '') {
  const el = $('conn-status');
  el.textContent = text;
  el.className = `conn ${kind}`;
  el.hidden = !text;
}

function onSocketState(s, info) {
  if (s === 'open') {
    setConn('');
    if (info && info.reopened) {
      // The server ends a streaming turn when its socket drops: show what it
      // stored — unless the turn is one the user started while the socket
      // was down (its chat_send goes now): its question stays, and its
      // answer streams into the view already there.
      if ((state.streaming || state.stopping) && !info.queued) {
        setStreaming(false);
        state.turn = null;
        reloadHistory();
      }
      toast('Reconnected.');
    }
  } else if (s === 'connecting') {
    setConn('Connecting…', 'busy');
  } else if (s === 'reconnecting') {
    setConn(info && info.delay ? `Reconnecting in ${Math.ceil(info.delay / 1000)} s…` : 'Reconnecting…', 'warn');
  }
}

async function reloadHistory() {
  if (!state.current) return;
  const id = state.current.id;
  try {
    const detail = await state.api.get(`/api/conversations/${encodeURIComponent(id)}`);
    if (state.current && state.current.id === id && !state.streaming) renderHistory(detail);
  } catch {
    /* keep what is shown */
  }
}

function ensureTurn() {
  if (!state.turn) state.turn = newAssistant();
  return state.turn;
}

function onEvent(type, d) {
  const near = isNearBottom();
  switch (type) {
    case 'chat_token':
      if (!state.streaming && !state.pending) setStreaming(true);
      ensureTurn().appendToken(String(d.token ?? ''));
      break;
    case 'tool_call_start':
      if (!state.streaming) setStreaming(true);
      ensureTurn().toolStart(d);
      break;
    case 'tool_call_result':
      ensureTurn().toolResult(d);
      break;
    case 'confirmation_required':
      state.pending = d;
      setStreaming(false);
      announce('The assistant asks for your approval.');
      ensureTurn().awaiting();
      dialog.show(d);
      break;
    case 'chat_complete': {
      const v = ensureTurn();
      v.clearAwaiting();
      v.complete(d);
      state.turn = null;
      state.pending = null;
      dialog.dismiss();
      setStreaming(false);
      touchCurrent();
      announce(d.status === 'cancelled' ? 'Answer stopped.' : 'Answer complete.');
      break;
    }
    case 'chat_error': {
      if (state.turn) {
        state.turn.clearAwaiting();
        state.turn.error(d);
      } else {
        $('message-list').append(h('div.standalone-error', null, errorBlock(d)));
        $('empty').hidden = true;
      }
      state.turn = null;
      setStreaming(false);
      announce(`Error: ${d.message || 'the answer failed'}`);
      break;
    }
    default:
      break;
  }
  if (near) scrollToBottom();
}

/** announce tells screen readers what happened (the message list itself is not live). */
function announce(text) {
  const el = $('sr-status');
  el.textContent = '';
  setTimeout(() => { el.textContent = text; }, 50);
}

function touchCurrent() {
  if (!state.current) return;
  upsertConversation({ id: state.current.id, updated_at: new Date().toISOString() });
}

function setStreaming(on) {
  state.streaming = on;
  clearTimeout(state.stopping);
  state.stopping = null;
  document.body.classList.toggle('streaming', on);
  $('stop-button').hidden = !on;
  $('send-button').hidden = on;
  $('stop-button').disabled = false;
}

/** setSQLMode switches the composer between questions and the user's own SQL. */
function setSQLMode(on) {
  state.sqlMode = on;
  document.body.classList.toggle('sql-mode', on);
  $('sql-mode').setAttribute('aria-pressed', String(on));
  $('chat-input').placeholder = on ? 'SELECT … — runs over this conversation’s datasets' : 'Ask a question about your data…';
  $('chat-input').setAttribute('aria-label', on ? 'SQL query' : 'Message');
  $('send-button').querySelector('span').textContent = on ? 'Run' : 'Send';
  $('chat-input').focus();
}

/** runSQL runs the user's own query and keeps it in the conversation. */
async function runSQL(text) {
  let conv = state.current;
  if (!conv) {
    try {
      conv = await newConversation(titleFrom(text));
    } catch {
      return;
    }
  }
  const input = $('chat-input');
  input.value = '';
  autoGrow();
  $('empty').hidden = true;
  const { el, card } = userSQL(text);
  $('message-list').append(el);
  state.messageCount++;
  scrollToBottom(true);
  try {
    const res = await state.api.post(`/api/conversations/${encodeURIComponent(conv.id)}/sql`, { query: text, keep: true });
    card.setResult({ ok: !res.error, error: res.error, columns: res.columns, rows: res.rows, row_count: res.row_count, truncated: res.truncated, elapsed_ms: res.elapsed_ms });
    touchCurrent();
  } catch (err) {
    // Not kept (a turn is running, a limit was hit, the server is down): say so.
    card.setResult({ ok: false, error: err.message || 'The query could not be run.' });
    el.classList.add('not-kept');
  }
  if (isNearBottom()) scrollToBottom();
}

async function send() {
  const input = $('chat-input');
  const text = input.value.trim();
  if (!text || state.streaming) return;
  if (state.sqlMode) {
    await runSQL(text);
    return;
  }
  if (state.current && !state.socket) {
    toast('Still opening the conversation…', 'warn');
    return;
  }
  if (state.pending) {
    dialog.show(state.pending);
    toast('Answer the pending request first.', 'warn');
    return;
  }
  let conv = state.current;
  if (!conv) {
    try {
      conv = await newConversation(titleFrom(text));
    } catch {
      return;
    }
  } else if ((conv.title === DEFAULT_TITLE || !conv.title) && state.messageCount === 0) {
    const title = titleFrom(text);
    state.api.patch(`/api/conversations/${encodeURIComponent(conv.id)}`, { title })
      .then((c) => upsertConversation(c && c.id ? c : { id: conv.id, title }))
      .catch(() => {});
  }
  input.value = '';
  autoGrow();
  $('empty').hidden = true;
  $('message-list').append(userMessage(text));
  state.messageCount++;
  state.turn = newAssistant();
  setStreaming(true);
  scrollToBottom(true);
  state.socket.send('chat_send', { content: text });
}

function titleFrom(text) {
  const line = text.split('\n').find((l) => l.trim()) || text;
  const t = line.trim().replace(/\s+/g, ' ');
  return t.length > 60 ? `${t.slice(0, 57).trimEnd()}…` : t;
}

function stop() {
  if (!state.streaming || !state.socket) return;
  const sent = state.socket.send('chat_cancel', {});
  $('stop-button').disabled = true;
  const v = state.turn;
  // If the server does not confirm the stop soon (socket gone), end it here.
  state.stopping = setTimeout(() => {
    if (state.turn === v && state.streaming) {
      if (v) v.complete({ status: 'cancelled' });
      state.turn = null;
      setStreaming(false);
    }
  }, sent ? 5000 : 0);
}

function answerConfirmation(id, approved, note) {
  if (!state.socket) return;
  const data = { id, approved };
  if (note) data.note = note;
  state.socket.send('confirm_action', data);
  state.pending = null;
  const v = ensureTurn();
  v.clearAwaiting();
  v.setWaiting(true);
  setStreaming(true);
}

// ---------- citations ----------

function showSource(anchor, src, n) {
  const pop = $('popover');
  clear(pop);
  const m = src.metadata || {};
  pop.append(
    h('div.pop-head', null,
      h('span.pop-num', null, String(n)),
      h('div.pop-title', null, h('div.pop-doc', null, String(m.document || 'Document')),
        h('div.pop-meta', null, [Number(m.page) > 0 ? `Page ${m.page}` : null, m.heading ? `“${m.heading}”` : null, typeof src.score === 'number' && src.score ? `score ${src.score.toFixed(2)}` : null].filter(Boolean).join(' · '))),
      h('button.icon-btn.small', { type: 'button', 'aria-label': 'Close', onclick: hidePopover }, icon('close', 14))),
    h('blockquote.pop-text', null, String(src.text || '')));
  pop.setAttribute('aria-label', sourceLabel(src));
  pop.hidden = false;
  const r = anchor.getBoundingClientRect();
  const pw = Math.min(420, window.innerWidth - 24);
  pop.style.width = `${pw}px`;
  const left = Math.max(12, Math.min(r.left - 20, window.innerWidth - pw - 12));
  pop.style.left = `${left}px`;
  const ph = pop.offsetHeight;
  const below = r.bottom + 8;
  pop.style.top = `${below + ph > window.innerHeight - 12 ? Math.max(12, r.top - ph - 8) : below}px`;
}

function hidePopover() {
  $('popover').hidden = true;
}

// ---------- scrolling ----------

function isNearBottom() {
  const s = $('messages');
  return s.scrollHeight - s.scrollTop - s.clientHeight < 120;
}

function scrollToBottom(force = false) {
  const s = $('messages');
  if (force || isNearBottom()) requestAnimationFrame(() => { s.scrollTop = s.scrollHeight; });
}

// ---------- boot ----------

function boot() {
  $('signin-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const key = $('api-key-input').value.trim();
    if (!key) {
      showSignIn('Enter your API key.');
      return;
    }
    signIn(key, { fromForm: true });
  });
  const key = readKeyFromFragment() || storedKey();
  if (key) signIn(key);
  else showSignIn('');
}

boot();
