// The session state shared by every page: the token, who it belongs to, what
// the role may do, and the API client bound to them.
import { reactive, computed } from 'vue';
import { createApi } from './lib/api.js';
import { TOKEN_KEY, permissionsFor } from './lib/session.js';

function readToken() {
  try {
    return sessionStorage.getItem(TOKEN_KEY) || '';
  } catch {
    return '';
  }
}

export const session = reactive({
  token: readToken(),
  me: null, // {name, role}
});

export const perms = computed(() => permissionsFor(session.me ? session.me.role : 'viewer'));

let unauthorizedHandler = () => {};
export function onUnauthorized(fn) {
  unauthorizedHandler = fn;
}

export const api = createApi({
  getToken: () => session.token,
  // Until whoami has answered, nothing may be changed.
  isReadOnly: () => !session.me || permissionsFor(session.me.role).readOnly,
  onUnauthorized: () => unauthorizedHandler(),
});

// Checks a token with GET /api/v1/whoami; on success keeps it for the tab.
export async function login(token) {
  const me = await api.get('/api/v1/whoami', { token });
  session.token = token;
  session.me = me;
  try {
    sessionStorage.setItem(TOKEN_KEY, token);
  } catch {
    /* storage refused: the session lasts until reload */
  }
  return me;
}

// Loads whoami for a token kept from earlier in this tab.
export async function restore() {
  if (!session.token) return false;
  if (session.me) return true;
  try {
    session.me = await api.get('/api/v1/whoami');
    return true;
  } catch (e) {
    if (e.status === 401) logout();
    throw e;
  }
}

export function logout() {
  session.token = '';
  session.me = null;
  try {
    sessionStorage.removeItem(TOKEN_KEY);
  } catch {
    /* nothing kept */
  }
}
