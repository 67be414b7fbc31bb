// The HTTP API client: JSON requests signed in by the session cookie (the
// browser sends it: same origin only) or by an API key (X-API-Key), and
// uploads with progress (XMLHttpRequest, since fetch has no upload progress).

export class ApiError extends Error {
  /** @param {number} status @param {string} type @param {string} message */
  constructor(status, type, message) {
    super(message);
    this.status = status;
    this.type = type;
  }
}

const NETWORK_MESSAGE = "Can't reach the datachat server. Check that it is running, then try again.";

function errorFrom(status, body, fallback) {
  const e = body && typeof body === 'object' ? body.error : null;
  const message = (e && typeof e.message === 'string' && e.message) || fallback || `Request failed (HTTP ${status}).`;
  const type = (e && typeof e.type === 'string' && e.type) || (status === 401 ? 'unauthorized' : 'error');
  const err = new ApiError(status, type, message);
  if (e && Array.isArray(e.problems)) err.problems = e.problems; // by field: the semantic layer editor shows each beside its field
  return err;
}

export class Api {
  /**
   * @param {string|null} key the API key, sent as X-API-Key; null: the
   *   session cookie signs the requests in (or nothing does, for sign-in itself)
   * @param {(err: ApiError) => void} onUnauthorized called when the server answers 401
   */
  constructor(key, onUnauthorized = () => {}) {
    this.key = key || null;
    this.onUnauthorized = onUnauthorized;
  }

  /** how the requests are signed in: 'key' or 'session'. */
  get auth() {
    return this.key ? 'key' : 'session';
  }

  async request(method, path, body) {
    const headers = { Accept: 'application/json' };
    if (this.key) headers['X-API-Key'] = this.key;
    const init = { method, headers, cache: 'no-store', credentials: 'same-origin' };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let res;
    try {
      res = await fetch(path, init);
    } catch {
      throw new ApiError(0, 'network', NETWORK_MESSAGE);
    }
    if (res.status === 204) return null;
    let data = null;
    const text = await res.text();
    if (text) {
      try {
        data = JSON.parse(text);
      } catch {
        data = null;
      }
    }
    if (!res.ok) {
      const err = errorFrom(res.status, data, res.status === 401 ? (this.key ? 'That API key was not accepted.' : 'You are not signed in. Sign in again.') : null);
      if (res.status === 401) this.onUnauthorized(err);
      throw err;
    }
    return data;
  }

  /**
   * file GETs a file the server makes (e.g. an export), signed in like the
   * other requests, and returns it with the name the server gave it.
   * @returns {Promise<{blob: Blob, filename: string}>}
   */
  async file(path) {
    const headers = {};
    if (this.key) headers['X-API-Key'] = this.key;
    let res;
    try {
      res = await fetch(path, { headers, cache: 'no-store', credentials: 'same-origin' });
    } catch {
      throw new ApiError(0, 'network', NETWORK_MESSAGE);
    }
    if (!res.ok) {
      let data = null;
      try {
        data = await res.json();
      } catch {
        data = null;
      }
      const err = errorFrom(res.status, data, null);
      if (res.status === 401) this.onUnauthorized(err);
      throw err;
    }
    const m = /filename="([^"]+)"/.exec(res.headers.get('Content-Disposition') || '');
    return { blob: await res.blob(), filename: m ? m[1] : '' };
  }

  get(path) { return this.request('GET', path); }
  post(path, body) { return this.request('POST', path, body ?? {}); }
  patch(path, body) { return this.request('PATCH', path, body); }
  put(path, body) { return this.request('PUT', path, body); }
  del(path) { return this.request('DELETE', path); }

  /**
   * upload posts a file as multipart field "file".
   * @param {string} path
   * @param {File} file
   * @param {(sent: number, total: number) => void} onProgress
   * @returns {{promise: Promise<any>, abort: () => void}}
   */
  upload(path, file, onProgress = () => {}) {
    const xhr = new XMLHttpRequest();
    const promise = new Promise((resolve, reject) => {
      xhr.open('POST', path);
      if (this.key) xhr.setRequestHeader('X-API-Key', this.key);
      xhr.setRequestHeader('Accept', 'application/json');
      xhr.upload.onprogress = (e) => onProgress(e.loaded, e.lengthComputable ? e.total : file.size);
      xhr.upload.onload = () => onProgress(file.size, file.size);
      xhr.onerror = () => reject(new ApiError(0, 'network', NETWORK_MESSAGE));
      xhr.onabort = () => reject(new ApiError(0, 'aborted', 'Upload cancelled.'));
      xhr.onload = () => {
        let data = null;
        try {
          data = xhr.responseText ? JSON.parse(xhr.responseText) : null;
        } catch {
          data = null;
        }
        if (xhr.status >= 200 && xhr.status < 300) {
          resolve(data);
          return;
        }
        const fallback = xhr.status === 413 ? 'The file is too large for this server.' : null;
        const err = errorFrom(xhr.status, data, fallback);
        if (xhr.status === 401) this.onUnauthorized(err);
        reject(err);
      };
      const form = new FormData();
      form.append('file', file, file.name);
      xhr.send(form);
    });
    return { promise, abort: () => xhr.abort() };
  }
}

/** listOf accepts either a bare array or {key: [...]} (e.g. {conversations: [...]}). */
export function listOf(data, key) {
  if (Array.isArray(data)) return data;
  if (data && Array.isArray(data[key])) return data[key];
  return [];
}
