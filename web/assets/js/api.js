// The HTTP API client: JSON requests with the API key, and uploads with
// progress (XMLHttpRequest, since fetch has no upload progress).

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
  return new ApiError(status, type, message);
}

export class Api {
  /**
   * @param {string} key the API key, sent as X-API-Key
   * @param {() => void} onUnauthorized called when the server answers 401
   */
  constructor(key, onUnauthorized = () => {}) {
    this.key = key;
    this.onUnauthorized = onUnauthorized;
  }

  async request(method, path, body) {
    const headers = { 'X-API-Key': this.key, Accept: 'application/json' };
    const init = { method, headers, cache: 'no-store' };
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
      const err = errorFrom(res.status, data, res.status === 401 ? 'That API key was not accepted.' : null);
      if (res.status === 401) this.onUnauthorized(err);
      throw err;
    }
    return data;
  }

  get(path) { return this.request('GET', path); }
  post(path, body) { return this.request('POST', path, body ?? {}); }
  patch(path, body) { return this.request('PATCH', path, body); }
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
      xhr.setRequestHeader('X-API-Key', this.key);
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
