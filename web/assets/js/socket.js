// The chat WebSocket of one conversation: {"type","data"} messages, automatic
// reconnection with exponential backoff and jitter, and a small queue for what
// is sent while (re)connecting.

export const BACKOFF_MS = [400, 1000, 2000, 4000, 8000, 15000];

/**
 * The close code of a socket whose credential ended (its key revoked, its
 * session signed out, its user disabled): reconnecting cannot help.
 */
export const CLOSE_REVOKED = 4401;

/** backoffDelay is the wait before reconnect attempt n (0-based), with ±20 % jitter. */
export function backoffDelay(attempt, random = Math.random) {
  const base = BACKOFF_MS[Math.min(attempt, BACKOFF_MS.length - 1)];
  return Math.round(base * (0.8 + 0.4 * random()));
}

/**
 * socketURL builds the same-origin ws:// or wss:// URL of a conversation. It
 * carries no key: URLs end up in reverse proxies' logs.
 */
export function socketURL(loc, conversationId) {
  const proto = loc.protocol === 'https:' ? 'wss:' : 'ws:';
  const q = new URLSearchParams({ conversation_id: conversationId });
  return `${proto}//${loc.host}/ws?${q}`;
}

/**
 * socketProtocols carries the API key to the WebSocket as a subprotocol (a
 * browser cannot set headers on one): the server selects datachat.v1 and never
 * echoes the key back. Signed in by the session cookie (no key), the browser
 * sends the cookie with the upgrade and no key is offered.
 */
export function socketProtocols(key) {
  return key ? ['datachat.v1', `datachat.key.${key}`] : ['datachat.v1'];
}

export class ChatSocket {
  /**
   * @param {object} o
   * @param {string} o.url
   * @param {string[]} [o.protocols] WebSocket subprotocols (the key, see socketProtocols)
   * @param {(type: string, data: any) => void} o.onEvent
   * @param {(state: 'connecting'|'open'|'reconnecting'|'closed', info?: {attempt: number, delay: number, reopened: boolean, queued?: number}) => void} o.onState
   *   on 'open', queued counts the messages sent while it was down, which it sends now
   * @param {(failures: number) => void} [o.onFailing] called after repeated failed connects (to check the key)
   * @param {(reason: string) => void} [o.onRevoked] called when the server closes the socket because the key
   *   was revoked (CLOSE_REVOKED), with its reason; the socket is then closed for good
   */
  constructor({ url, protocols, onEvent, onState, onFailing, onRevoked }) {
    this.url = url;
    this.protocols = protocols || [];
    this.onEvent = onEvent;
    this.onState = onState;
    this.onFailing = onFailing || (() => {});
    this.onRevoked = onRevoked || (() => {});
    this.ws = null;
    this.queue = [];
    this.attempt = 0;
    this.failures = 0;
    this.closed = false;
    this.everOpened = false;
    this.timer = null;
  }

  connect() {
    if (this.closed) return;
    clearTimeout(this.timer);
    this.onState(this.everOpened || this.attempt ? 'reconnecting' : 'connecting', { attempt: this.attempt, delay: 0, reopened: false });
    let ws;
    try {
      ws = new WebSocket(this.url, this.protocols);
    } catch {
      this.scheduleReconnect();
      return;
    }
    this.ws = ws;
    let opened = false;
    ws.onopen = () => {
      if (this.ws !== ws) return;
      opened = true;
      const reopened = this.everOpened;
      this.everOpened = true;
      this.attempt = 0;
      this.failures = 0;
      const q = this.queue.splice(0);
      this.onState('open', { attempt: 0, delay: 0, reopened, queued: q.length });
      for (const m of q) ws.send(m);
    };
    ws.onmessage = (e) => {
      if (this.ws !== ws) return;
      let msg;
      try {
        msg = JSON.parse(e.data);
      } catch {
        return;
      }
      if (msg && typeof msg.type === 'string') this.onEvent(msg.type, msg.data ?? {});
    };
    ws.onclose = (e) => {
      if (this.ws !== ws) return;
      this.ws = null;
      if (this.closed) return;
      if (e && e.code === CLOSE_REVOKED) {
        this.close();
        this.onRevoked(e.reason || '');
        return;
      }
      if (!opened) {
        this.failures++;
        if (this.failures >= 2) this.onFailing(this.failures);
      }
      this.scheduleReconnect();
    };
    ws.onerror = () => {}; // onclose follows
  }

  scheduleReconnect() {
    if (this.closed) return;
    const delay = backoffDelay(this.attempt);
    this.onState('reconnecting', { attempt: this.attempt + 1, delay, reopened: false });
    this.attempt++;
    this.timer = setTimeout(() => this.connect(), delay);
  }

  /** reconnectNow skips the backoff wait (e.g. when the page becomes visible). */
  reconnectNow() {
    if (this.closed || this.ws) return;
    this.connect();
  }

  get isOpen() {
    return !!this.ws && this.ws.readyState === WebSocket.OPEN;
  }

  /**
   * send sends a message now or, while connecting, once the socket opens.
   * chat_cancel is not queued (a dropped socket cancels the turn anyway).
   */
  send(type, data = {}) {
    const m = JSON.stringify({ type, data });
    if (this.isOpen) {
      this.ws.send(m);
      return true;
    }
    if (type === 'chat_cancel') return false;
    this.queue.push(m);
    if (!this.ws) this.reconnectNow();
    return true;
  }

  close() {
    this.closed = true;
    clearTimeout(this.timer);
    this.queue = [];
    if (this.ws) {
      const ws = this.ws;
      this.ws = null;
      try {
        ws.close(1000);
      } catch {
        /* already closed */
      }
    }
    this.onState('closed');
  }
}
