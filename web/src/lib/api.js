// The REST client: one place that adds the bearer token, turns the API's
// {"error":{"code","message"}} answers into ApiError, and refuses to send a
// mutating request while the session is read-only (a viewer), so the UI can
// never change anything on a viewer's behalf even if a control slipped through.

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
  }
}

const MUTATING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

// Routes that use POST but change nothing; a viewer may call them.
const READ_ONLY_POSTS = [/^\/api\/v1\/scheduler\/preview$/];

export function isMutating(method, path) {
  const m = String(method || 'GET').toUpperCase();
  if (!MUTATING.has(m)) return false;
  const p = String(path || '').split('?')[0];
  return !(m === 'POST' && READ_ONLY_POSTS.some((re) => re.test(p)));
}

// Returns {code, message} from an error answer's status and body text. The
// body is normally the API's JSON error; anything else (a proxy's HTML page,
// an empty body) still gives a message a user can act on.
export function extractError(status, bodyText, statusText = '') {
  let code = status ? `http_${status}` : 'network_error';
  let message = '';
  if (bodyText) {
    try {
      const j = JSON.parse(bodyText);
      if (j && typeof j === 'object' && j.error && typeof j.error === 'object') {
        if (typeof j.error.code === 'string' && j.error.code) code = j.error.code;
        if (typeof j.error.message === 'string') message = j.error.message;
      } else if (j && typeof j.message === 'string') {
        message = j.message;
      }
    } catch {
      const text = String(bodyText).trim();
      if (text && !text.startsWith('<')) message = text.slice(0, 300);
    }
  }
  if (!message) message = status ? `HTTP ${status}${statusText ? ' ' + statusText : ''}` : 'network error';
  return { code, message };
}

// Builds a query string from an object, leaving out empty values.
export function query(params) {
  const parts = [];
  for (const [k, v] of Object.entries(params || {})) {
    if (v === undefined || v === null || v === '') continue;
    parts.push(`${encodeURIComponent(k)}=${encodeURIComponent(v)}`);
  }
  return parts.length ? `?${parts.join('&')}` : '';
}

// createApi({getToken, isReadOnly, onUnauthorized, fetchImpl, baseUrl})
export function createApi(opts = {}) {
  const {
    baseUrl = '',
    getToken = () => '',
    isReadOnly = () => false,
    onUnauthorized = () => {},
    fetchImpl = (...a) => globalThis.fetch(...a),
  } = opts;

  async function raw(method, path, { body, token, headers = {}, signal } = {}) {
    if (isMutating(method, path) && isReadOnly()) {
      throw new ApiError(403, 'read_only', 'read-only session: this change was not sent');
    }
    const h = { Accept: 'application/json', ...headers };
    const t = token ?? getToken();
    if (t) h.Authorization = `Bearer ${t}`;
    if (body !== undefined) h['Content-Type'] = 'application/json';
    let res;
    try {
      res = await fetchImpl(baseUrl + path, {
        method,
        headers: h,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal,
      });
    } catch (e) {
      if (e && e.name === 'AbortError') throw e;
      throw new ApiError(0, 'network_error', e && e.message ? e.message : 'network error');
    }
    if (!res.ok) {
      let text = '';
      try {
        text = await res.text();
      } catch {
        /* the body is optional */
      }
      const { code, message } = extractError(res.status, text, res.statusText);
      if (res.status === 401 && token === undefined) onUnauthorized();
      throw new ApiError(res.status, code, message);
    }
    return res;
  }

  async function json(method, path, body, extra) {
    const res = await raw(method, path, { ...extra, body });
    const text = await res.text();
    return text ? JSON.parse(text) : null;
  }

  return {
    raw,
    get: (path, extra) => json('GET', path, undefined, extra),
    post: (path, body, extra) => json('POST', path, body ?? {}, extra),
    put: (path, body, extra) => json('PUT', path, body, extra),
    del: (path, extra) => json('DELETE', path, undefined, extra),
    // Text routes (task logs): the body and the headers.
    async text(path, extra) {
      const res = await raw('GET', path, extra);
      return { text: await res.text(), headers: res.headers };
    },
  };
}
