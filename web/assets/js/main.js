// datachat's web page: sign-in, conversations, chat over the WebSocket, the
// data panel and the confirmation dialog; conversations shared with the user
// (read-only, rendered by the same code), the user's keys, and the admin
// page for admins. Plain ES modules, no build step.

import { Api, ApiError, listOf } from './api.js';
import { ChatSocket, socketURL, socketProtocols } from './socket.js';
import { h, icon, clear } from './dom.js';
import { AssistantView, userMessage, userSQL, errorBlock } from './chat.js';
import { DataPanel } from './panel.js';
import { Examples } from './verify.js';
import { ConfirmDialog } from './confirm.js';
import { sourceLabel } from './cards.js';
import { readFragment, loadKey, saveKey, KEY_STORAGE } from './auth.js';
import { SignIn } from './signin.js';
import { renderUser, KeysDialog } from './account.js';
import { AdminPage, ADMIN_TABS } from './admin.js';
import { ShareDialog, renderSharedList } from './share.js';
import { relTime, notCopiedText } from './teams.js';
import { maxQuestionChars } from './formats.js';
import { ConversationSearch } from './search.js';
import { ExportButton } from './export.js';
import { wireSample } from './sample.js';
import { showSharedLayer } from './semantic.js';

const DEFAULT_TITLE = 'New conversation';
const SIGNED_OUT = 'You were signed out. Sign in again.';
const $ = (id) => document.getElementById(id);

const state = {
  api: null,
  me: null, // GET /api/me: {id, name, role, auth, email?}
  conversations: [],
  sharedWithMe: [], // GET /api/shared
  current: null, // {id, title, …}: one of the user's conversations
  shared: null, // {id, owner, title}: a conversation shared with the user, read-only
  copyNote: null, // {id, owner, items}: what the copy just made left out
  messageCount: 0,
  socket: null,
  turn: null, // the AssistantView receiving events
  streaming: false,
  stopping: null, // timer while waiting for chat_complete after Stop
  pending: null, // the confirmation waiting for an answer
  openGen: 0,
  blank: new Set(), // conversations "New conversation" made that nothing was added to or asked in yet
};

let panel;
let dialog;
let examples;
let signin;
let keysDialog;
let shareDialog;
let admin;
let search;
let exporter;
// Tabs of this browser tell each other when one signs in or out.
const tabs = typeof BroadcastChannel === 'function' ? new BroadcastChannel('datachat.session') : null;

// ---------- sign-in ----------

const isAdmin = () => !!(state.me && state.me.role === 'admin');

/** unauthorized signs out when the server no longer takes the credential, saying why. */
function unauthorized(err) {
  if (!state.api) return;
  signOut(err && err.message ? err.message : SIGNED_OUT);
}

/** signInWithKey signs in with an API key (the key form, a #key= link, or the one kept). */
async function signInWithKey(key, { fromForm = false } = {}) {
  const api = new Api(key, unauthorized);
  signin.busy(true);
  try {
    const me = await fetchMe(api);
    saveKey(localStorage, key);
    await startSession(api, me);
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) {
      saveKey(localStorage, null);
      // A kept key that no longer works may sit beside a live session.
      if (!fromForm && (await resumeSession({ quiet: true }))) return;
      signin.show(fromForm ? 'That API key was not accepted. Check it and try again.' : (err.message && !/not accepted/.test(err.message) ? err.message : 'The saved API key was not accepted. Sign in again.'));
    } else {
      // The server may just be restarting: keep the key so "Sign in" retries.
      signin.show(err.message || 'Sign-in failed.');
      $('key-signin').open = true;
      $('api-key-input').value = key;
    }
  } finally {
    signin.busy(false);
  }
}

/** fetchMe asks who the credential signs in (null from a server without accounts). */
async function fetchMe(api) {
  try {
    return await api.get('/api/me');
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) {
      await api.get('/api/conversations'); // an older server: the key is checked here
      return null;
    }
    throw err;
  }
}

/**
 * resumeSession signs in with the browser's session cookie, if it has a live
 * one, and says whether it did; quiet: without one, leave the page as it is.
 */
async function resumeSession({ quiet = false } = {}) {
  const api = new Api(null, unauthorized);
  try {
    const me = await api.get('/api/me');
    await startSession(api, me);
    return true;
  } catch (err) {
    if (quiet) return false;
    if (err instanceof ApiError && (err.status === 401 || err.status === 404)) signin.show('');
    else signin.show(err.message || 'Sign-in failed.');
    return false;
  }
}

/** refreshMe reads who is signed in again (an admin may have changed their own role). */
async function refreshMe() {
  try {
    state.me = await state.api.get('/api/me');
  } catch {
    return; // a 401 signs out through the Api's handler
  }
  renderUser(state.me);
  $('open-admin').hidden = !isAdmin();
  if (!isAdmin() && !$('admin-view').hidden) {
    hideAdmin();
    toast('You are no longer an administrator.');
  }
}

/** signedIn: a password or an invite set the session cookie. */
async function signedIn(me) {
  saveKey(localStorage, null); // the session speaks for this browser now
  const api = new Api(null, unauthorized);
  try {
    await startSession(api, me || (await api.get('/api/me')));
    if (tabs) tabs.postMessage('signed-in');
  } catch (err) {
    signin.show(err.message || 'Sign-in failed.');
  }
}

async function startSession(api, me) {
  const data = await api.get('/api/conversations');
  state.api = api;
  state.me = me;
  state.conversations = listOf(data, 'conversations');
  startApp();
}

/**
 * signOut ends the page's sign-in and shows the sign-in form with message.
 * byUser: the user asked, so the session is ended on the server too (a
 * revoked or disabled credential is already over there).
 */
async function signOut(message, { byUser = false } = {}) {
  const api = state.api;
  if (!api) {
    signin.show(message || '');
    return;
  }
  state.api = null;
  closeSocket();
  dialog && dialog.dismiss();
  for (const d of ['share-dialog', 'keys-dialog']) if ($(d).open) $(d).close();
  if (api.key) saveKey(localStorage, null);
  state.current = null;
  state.shared = null;
  state.me = null;
  state.conversations = [];
  state.sharedWithMe = [];
  state.blank.clear();
  if (search) search.clear();
  setReadOnly(false);
  history.replaceState(null, '', location.pathname + location.search);
  if (byUser && !api.key) {
    // The session ends on the server before the page says so: a reload
    // right after must not find it alive.
    try {
      await api.post('/api/auth/logout');
    } catch {
      /* already signed out there, or the server is away: the cookie is all that is left */
    }
  }
  signin.show(message || '', byUser ? 'info' : 'error');
  if (byUser && tabs) tabs.postMessage('signed-out');
}

// ---------- app shell ----------

// ---------- app shell ----------

let started = false;

function startApp() {
  $('signin').hidden = true;
  $('app').hidden = false;
  $('admin-view').hidden = true;
  if (!started) {
    started = true;
    examples = new Examples(() => state.api);
    panel = new DataPanel({
      api: () => state.api,
      ensureConversation,
      examples,
      onChange: ({ datasets, documents, sources }) => {
        const n = datasets + documents + sources;
        if (n && state.current) state.blank.delete(state.current.id);
        const badge = $('data-count');
        badge.textContent = n ? String(n) : '';
        badge.hidden = !n;
      },
    });
    wireSample(panel);
    dialog = new ConfirmDialog(answerConfirmation);
    keysDialog = new KeysDialog(() => state.api);
    shareDialog = new ShareDialog(() => state.api);
    search = new ConversationSearch({ api: () => state.api, onOpen: (id) => openConversation(id), current: () => (state.current ? state.current.id : null) });
    exporter = new ExportButton({ api: () => state.api, current: () => state.current, toast });
    admin = new AdminPage({ api: () => state.api, me: () => state.me, onTab: (tab) => setHash(`admin=${tab}`), onSelfChanged: () => refreshMe() });
    wireShell();
  }
  renderUser(state.me);
  $('open-admin').hidden = !isAdmin();
  fitPlaceholder();
  examples.load();
  renderConversations();
  loadShared();
  route();
}

/** route shows what the address names: a conversation, a shared one, or the admin page. */
function route() {
  const params = new URLSearchParams(location.hash.replace(/^#/, ''));
  const tab = params.get('admin');
  if (tab !== null && isAdmin()) {
    showEmpty();
    showAdmin(ADMIN_TABS.includes(tab) ? tab : 'users');
    return;
  }
  const shared = params.get('shared');
  if (shared) {
    openShared(shared);
    return;
  }
  // A conversation made in another tab is not in this one's list yet: opening it asks the server.
  const id = params.get('c');
  if (id) openConversation(id);
  else showEmpty();
}

/** refreshConversations reloads the list (another tab may have added or removed some). */
async function refreshConversations() {
  try {
    const data = await state.api.get('/api/conversations');
    const fresh = listOf(data, 'conversations');
    if (state.current && !fresh.some((c) => c.id === state.current.id)) fresh.push(state.current);
    state.conversations = fresh;
    renderConversations();
  } catch {
    /* keep the list shown; a 401 signs out through the Api's handler */
  }
}

// ---------- admin page ----------

function showAdmin(tab) {
  closeDrawers();
  $('app').hidden = true;
  $('admin-view').hidden = false;
  admin.show(tab);
}

function hideAdmin() {
  $('admin-view').hidden = true;
  $('app').hidden = false;
  if (state.current) setHash(`c=${encodeURIComponent(state.current.id)}`);
  else if (state.shared) setHash(`shared=${encodeURIComponent(state.shared.id)}`);
  else setHash(null);
}

// ---------- shared with me ----------

async function loadShared() {
  if (!state.api) return;
  try {
    state.sharedWithMe = listOf(await state.api.get('/api/shared'), 'conversations');
  } catch {
    state.sharedWithMe = []; // a server without sharing, or a passing failure: the list stays empty
  }
  renderShared();
}

function renderShared() {
  renderSharedList(state.sharedWithMe, state.shared && state.shared.id, (id) => openShared(id));
}

/** setReadOnly switches the chat between the user's own conversation and a shared one. */
function setReadOnly(on) {
  document.body.classList.toggle('read-only', on);
  $('readonly-bar').hidden = !on;
  $('composer').hidden = on;
  $('readonly-status').hidden = true;
  $('open-data').hidden = on;
  updateShareButton();
}

function updateShareButton() {
  $('share-button').hidden = !state.current || !!state.shared;
  if (exporter) exporter.update();
}

/**
 * openShared shows a conversation someone shared with the user: the owner's
 * messages and cards, built by the code that builds the owner's, without the
 * composer, the data panel or anything that acts on the owner's data.
 */
async function openShared(id) {
  const gen = leaveOpen();
  state.current = null;
  const known = state.sharedWithMe.find((c) => c.id === id);
  state.shared = { id, owner: known ? known.owner : '', title: known ? known.title : '' };
  setReadOnly(true);
  setHash(`shared=${encodeURIComponent(id)}`);
  $('conv-title').textContent = state.shared.title || 'Shared conversation';
  $('conv-title').classList.remove('placeholder');
  renderReadOnlyBar(state.shared, null);
  showSharedLayer(state.api, id); // the semantic layer, read-only, under the bar
  renderConversations();
  renderShared();
  panel.load(null);
  clear($('message-list'));
  $('empty').hidden = true;
  const detail = await loadDetail(gen, 'Loading the shared conversation…', `/api/shared/${encodeURIComponent(id)}`, (list) => {
    state.sharedWithMe = state.sharedWithMe.filter((c) => c.id !== id);
    renderShared();
    list.append(errorBlock({ message: 'This conversation is no longer shared with you.', suggested_action: 'Ask its owner to share it again.' }));
  });
  if (!detail) return;
  state.shared = { id, owner: String(detail.owner || state.shared.owner || ''), title: String(detail.title || state.shared.title || '') };
  $('conv-title').textContent = state.shared.title || 'Shared conversation';
  renderReadOnlyBar(state.shared, detail);
  renderHistory(detail, { readOnly: true });
}

/** renderReadOnlyBar says whose conversation this is and what data it holds. */
function renderReadOnlyBar(shared, detail) {
  $('readonly-owner').textContent = shared.owner ? `Shared by ${shared.owner} · read-only` : 'Shared with you · read-only';
  const names = [];
  if (detail) {
    for (const d of detail.datasets || []) if (d && d.name) names.push(String(d.name));
    for (const d of detail.documents || []) if (d && d.name) names.push(String(d.name));
    for (const d of detail.sources || []) if (d && d.name) names.push(`${d.name} (database)`);
  }
  $('readonly-data').textContent = names.length ? `Data: ${names.join(', ')}` : '';
  $('copy-shared').disabled = false;
}

/** copyShared copies the shared conversation into the user's own and opens the copy. */
async function copyShared() {
  const shared = state.shared;
  if (!shared) return;
  const btn = $('copy-shared');
  btn.disabled = true;
  $('readonly-status').hidden = true;
  try {
    const res = await state.api.post(`/api/shared/${encodeURIComponent(shared.id)}/copy`);
    const conv = res && res.conversation;
    if (!conv || !conv.id) throw new Error('The server did not return the copy.');
    state.conversations = [...state.conversations.filter((c) => c.id !== conv.id), conv];
    const items = Array.isArray(res.not_copied) ? res.not_copied : [];
    state.copyNote = { id: conv.id, owner: shared.owner, items };
    await openConversation(conv.id);
    toast(items.length ? `Copied, without ${items.length} item${items.length === 1 ? '' : 's'}: see the note above the messages.` : 'Copied into your conversations.');
  } catch (err) {
    btn.disabled = false;
    const st = $('readonly-status');
    st.textContent = err.message || 'The conversation was not copied.';
    st.hidden = false;
  }
}

/** copyNote says, above a fresh copy's messages, where it came from and what it left out. */
function copyNote(note) {
  const items = note.items.map(notCopiedText).filter(Boolean);
  return h('div.copy-note', { testid: 'copy-note', role: 'status' },
    h('div.copy-note-head', null, icon('copy', 15),
      h('span', null, `A copy of ${note.owner ? `${note.owner}’s` : 'a shared'} conversation: its messages${items.length ? ' and the data you may have' : ', datasets, documents and databases'} are yours now. Ask a follow-up below.`)),
    items.length ? h('div.copy-note-missing', null, h('strong', null, 'Not copied:'),
      h('ul', { testid: 'not-copied' }, items.map((t) => h('li', { testid: 'not-copied-item' }, t)))) : null);
}

function wireShell() {
  $('new-conversation').addEventListener('click', () => startConversation());
  $('sign-out').addEventListener('click', () => signOut('Signed out.', { byUser: true }));
  $('my-keys').addEventListener('click', () => {
    closeDrawers();
    keysDialog.open();
  });
  $('open-admin').addEventListener('click', () => showAdmin(admin.tab || 'users'));
  $('admin-back').addEventListener('click', () => hideAdmin());
  $('share-button').addEventListener('click', () => state.current && shareDialog.open(state.current));
  $('copy-shared').addEventListener('click', () => copyShared());
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
  input.addEventListener('input', () => {
    autoGrow();
    showLength();
  });
  window.addEventListener('resize', fitPlaceholder);
  $('stop-button').addEventListener('click', stop);
  document.addEventListener('keydown', (e) => {
    if (e.key !== 'Escape' || e.defaultPrevented) return;
    if (dialog.isOpen || $('share-dialog').open || $('keys-dialog').open) return; // a dialog closes itself
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
    if (document.hidden || !state.api) return;
    if (state.socket) state.socket.reconnectNow();
    refreshConversations();
    loadShared();
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
    if (!hasFiles(e) || $('app').hidden || state.shared) return;
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
    if ($('app').hidden || state.shared) return; // a shared conversation is read-only
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

// The composer's placeholders, longest first: the first that fits is shown
// (a phone cuts the long one).
const PLACEHOLDERS = {
  ask: ['Ask a question about your data…', 'Ask about your data…', 'Ask a question…'],
  sql: ['SELECT … — runs over this conversation’s datasets', 'SELECT … over your datasets', 'SELECT …'],
};

/** fitPlaceholder shows the longest placeholder that fits the composer on one line. */
function fitPlaceholder() {
  const input = $('chat-input');
  const options = PLACEHOLDERS[state.sqlMode ? 'sql' : 'ask'];
  const cs = getComputedStyle(input);
  const room = input.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
  const ctx = (fitPlaceholder.canvas ||= document.createElement('canvas')).getContext('2d');
  let pick = options[0]; // not laid out yet (hidden): fitted again on start and on resize
  if (ctx && room > 0) {
    ctx.font = `${cs.fontStyle} ${cs.fontWeight} ${cs.fontSize} ${cs.fontFamily}`;
    pick = options.find((t) => ctx.measureText(t).width <= room) || options[options.length - 1];
  }
  input.placeholder = pick;
}

/**
 * showLength counts the question's characters against the chat's limit
 * (GET /api/formats): near it the count shows, over it a message says the
 * limit. sending: the user tried to send; returns true when the question is
 * too long to send.
 */
function showLength({ sending = false } = {}) {
  const input = $('chat-input');
  let note = $('composer-length');
  if (!note) {
    note = h('div.composer-length', { id: 'composer-length', testid: 'composer-length', 'aria-live': 'polite', hidden: true });
    $('composer').querySelector('.composer-box').after(note);
  }
  const limit = state.sqlMode ? 0 : maxQuestionChars(panel && panel.formats);
  const n = [...input.value.trim()].length;
  const over = limit > 0 && n > limit;
  note.hidden = !(limit > 0 && n > limit * 0.9);
  note.classList.toggle('over', over);
  input.classList.toggle('too-long', over);
  if (over) input.setAttribute('aria-invalid', 'true');
  else input.removeAttribute('aria-invalid');
  if (!note.hidden) {
    const count = `${n.toLocaleString('en-US')} / ${limit.toLocaleString('en-US')} characters`;
    note.textContent = over
      ? `${count}: a question may be at most ${limit.toLocaleString('en-US')} characters long. Shorten it${sending ? ' to send it' : ''}, or add the long text as a document and ask about it.`
      : count;
    if (over && sending) note.setAttribute('role', 'alert');
    else note.removeAttribute('role');
  }
  return over;
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
      state.blank.delete(c.id);
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

/**
 * startConversation is the "New conversation" button: it opens a fresh
 * conversation — the open one when nothing was added to or asked in it yet,
 * or another such one this page made — so clicks leave no trail of empty
 * entries; else it makes one.
 */
async function startConversation() {
  if (search) search.clear();
  const c = state.current;
  const untouched = c && !state.shared && !state.streaming && !state.pending && state.messageCount === 0
    && !panel.datasets.length && !panel.documents.length && !panel.sources.attached.size
    && (!c.title || c.title === DEFAULT_TITLE);
  if (untouched) {
    closeDrawers();
    $('chat-input').focus();
    return c;
  }
  const spare = state.conversations.find((x) => state.blank.has(x.id) && (!x.title || x.title === DEFAULT_TITLE) && (!c || x.id !== c.id));
  if (spare) {
    await openConversation(spare.id);
    $('chat-input').focus();
    return spare;
  }
  const made = await newConversation();
  state.blank.add(made.id);
  return made;
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

/**
 * openOrNew returns the open conversation, or a new one titled title (the
 * default title when none) when none is open. It throws what making one
 * failed with, after a toast saying why.
 */
async function openOrNew(title) {
  return state.current || newConversation(title);
}

/**
 * conversationFor returns the open conversation, or a new one titled from
 * text when none is open; null when none could be made (a toast said why).
 */
function conversationFor(text) {
  return openOrNew(titleFrom(text)).catch(() => null);
}

/**
 * ensureConversation returns the open conversation's id, creating one first
 * if none is open; the data panel shows what it throws.
 */
async function ensureConversation() {
  return (await openOrNew()).id;
}

/** setHash keeps the page's place in the address: "c=ID", "shared=ID", "admin=TAB" (null: none). */
function setHash(frag) {
  history.replaceState(null, '', location.pathname + location.search + (frag ? `#${frag}` : ''));
}

function showEmpty() {
  closeSocket();
  state.current = null;
  state.shared = null;
  setReadOnly(false);
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
  renderShared();
}

/**
 * leaveOpen ends what the conversation on screen has running (its socket, a
 * dialog or popover, the drawers, a turn) before another opens, and returns
 * the new opening's generation: what is read for it is dropped once
 * state.openGen has moved on.
 */
function leaveOpen() {
  const gen = ++state.openGen;
  closeSocket();
  dialog.dismiss();
  hidePopover();
  closeDrawers();
  state.turn = null;
  state.pending = null;
  setStreaming(false);
  return gen;
}

async function openConversation(id, { fresh = null } = {}) {
  const gen = leaveOpen();
  const known = state.conversations.find((c) => c.id === id);
  state.current = fresh || known || { id, title: '' };
  state.shared = null;
  setReadOnly(false);
  state.messageCount = 0;
  setHash(`c=${encodeURIComponent(id)}`);
  $('conv-title').textContent = state.current.title || DEFAULT_TITLE;
  $('conv-title').classList.remove('placeholder');
  renderConversations();
  renderShared();
  clear($('message-list'));
  $('empty').hidden = !fresh; // a new conversation shows the welcome
  panel.load(id);
  if (!fresh) {
    const detail = await loadDetail(gen, 'Loading conversation…', `/api/conversations/${encodeURIComponent(id)}`, () => {
      state.conversations = state.conversations.filter((c) => c.id !== id);
      toast('That conversation no longer exists.', 'error');
      showEmpty();
    });
    if (!detail) return;
    renderHistory(detail);
  }
  connectSocket(id);
}

/**
 * loadDetail reads path (a conversation's detail) with a loading line in the
 * message list. It returns null when another conversation was opened
 * meanwhile (gen is no longer state.openGen) or the read failed: a 404 is
 * handed to gone with the emptied list, any other failure is shown there.
 */
async function loadDetail(gen, label, path, gone) {
  const list = $('message-list');
  list.append(h('div.loading', null, h('span.spinner'), label));
  try {
    const detail = await state.api.get(path);
    return gen === state.openGen ? detail : null;
  } catch (err) {
    if (gen !== state.openGen) return null;
    clear(list);
    if (err.status === 404) gone(list);
    else list.append(errorBlock({ message: err.message }));
    return null;
  }
}

/**
 * renderHistory shows a stored conversation: the user's own, or (readOnly)
 * one shared with them, through the same message and card code.
 */
function renderHistory(detail, { readOnly = false } = {}) {
  const list = $('message-list');
  clear(list);
  const { messages = [], pending_confirmation: pending, ...conv } = detail || {};
  if (!readOnly && conv.id) upsertConversation(conv);
  state.messageCount = messages.length;
  if (messages.length && conv.id) state.blank.delete(conv.id);
  $('empty').hidden = messages.length > 0 || readOnly;
  if (!readOnly && state.copyNote && state.copyNote.id === conv.id) list.append(copyNote(state.copyNote));
  if (readOnly && !messages.length) list.append(h('p.muted.readonly-empty', null, 'This conversation has no messages yet.'));
  const ctx = viewContext({ readOnly });
  let last = null;
  for (const m of messages) {
    const ran = m.role === 'user' && (m.tool_calls || []).find((tc) => tc.tool === 'execute_sql');
    if (ran) {
      let query = '';
      try {
        query = (typeof ran.args === 'string' ? JSON.parse(ran.args) : ran.args).query || '';
      } catch { /* keep it empty */ }
      list.append(userSQL(query, ran, readOnly && state.shared ? state.shared.owner : '').el);
    } else if (m.role === 'user') list.append(userMessage(m.content));
    else if (m.role === 'assistant') {
      last = AssistantView.fromStored(m, ctx);
      list.append(last.el);
    }
  }
  if (pending && !readOnly) {
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

/** viewContext is what answers may do: a shared conversation's only show (no verdicts, no reloads of the owner's data). */
function viewContext({ readOnly = false } = {}) {
  if (readOnly) return { showSource, readOnly: true };
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
    onRevoked: (reason) => {
      if (state.socket === sock) signOut(reason || (state.api && state.api.key ? 'Your API key is no longer accepted. Sign in again.' : SIGNED_OUT));
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
  delete document.body.dataset.socket;
}

function setConn(text, kind = '') {
  const el = $('conn-status');
  el.textContent = text;
  el.className = `conn ${kind}`;
  el.hidden = !text;
}

function onSocketState(s, info) {
  document.body.dataset.socket = s; // tests and styles read whether the chat socket is open
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
  fitPlaceholder();
  showLength();
  $('chat-input').setAttribute('aria-label', on ? 'SQL query' : 'Message');
  $('send-button').querySelector('span').textContent = on ? 'Run' : 'Send';
  $('chat-input').focus();
}

/** runSQL runs the user's own query and keeps it in the conversation. */
async function runSQL(text) {
  const conv = await conversationFor(text);
  if (!conv) return;
  const input = $('chat-input');
  input.value = '';
  autoGrow();
  state.blank.delete(conv.id);
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
  if (!text || state.streaming || state.shared) return;
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
  // A question the chat would refuse is neither stored nor made a title.
  if (showLength({ sending: true })) {
    input.focus();
    return;
  }
  const opened = state.current;
  const conv = await conversationFor(text);
  if (!conv) return;
  if (conv === opened && (conv.title === DEFAULT_TITLE || !conv.title) && state.messageCount === 0) {
    const title = titleFrom(text);
    state.api.patch(`/api/conversations/${encodeURIComponent(conv.id)}`, { title })
      .then((c) => upsertConversation(c && c.id ? c : { id: conv.id, title }))
      .catch(() => {});
  }
  input.value = '';
  autoGrow();
  showLength();
  state.blank.delete(conv.id);
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
  signin = new SignIn({
    onKey: (key) => signInWithKey(key, { fromForm: true }),
    onSignedIn: (me) => signedIn(me),
  });
  const f = readFragment(location.hash);
  // Sign-in's parts of the address leave it at once (and its history).
  history.replaceState(null, '', location.pathname + location.search + (f.rest ? `#${f.rest}` : ''));
  window.addEventListener('hashchange', () => {
    // An address typed or followed in this tab (setHash's replaceState fires nothing).
    const g = readFragment(location.hash);
    if (g.key || g.invite || g.signinError) location.reload();
    else if (state.api) route();
  });
  window.addEventListener('storage', (e) => {
    // Another tab signed out with the key this one uses.
    if (e.key === KEY_STORAGE && !e.newValue && state.api && state.api.key) signOut('Signed out in another tab.');
  });
  if (tabs) {
    tabs.onmessage = (e) => {
      if (e.data === 'signed-out' && state.api && !state.api.key) signOut('Signed out in another tab.');
      else if (e.data === 'signed-in' && !state.api && !$('signin').hidden && $('invite-form').hidden) resumeSession();
    };
  }
  if (f.invite) {
    signin.showInvite(f.invite);
    return;
  }
  if (f.key) {
    signInWithKey(f.key);
    return;
  }
  if (f.signinError) {
    signin.show(f.signinError);
    return;
  }
  const key = loadKey(localStorage, sessionStorage);
  if (key) signInWithKey(key);
  else resumeSession();
}

boot();
