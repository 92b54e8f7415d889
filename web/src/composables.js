import { onBeforeUnmount } from 'vue';
import { ElMessage } from './element-plus.js';
import { onEvent } from './events.js';
import { throttle } from './lib/throttle.js';
import { i18n } from './i18n/index.js';

// Reloads a page's data when an event of one of `types` arrives, at most
// once per `ms` (a burst of task events gives one reload, not fifty).
export function useLiveRefresh(types, reload, ms = 1000) {
  const th = throttle(() => reload({ quiet: true }), ms);
  const off = onEvent((type) => {
    if (types.includes(type)) th();
  });
  onBeforeUnmount(() => {
    off();
    th.cancel();
  });
}

export function toastOk(message) {
  ElMessage({ type: 'success', message, showClose: true, duration: 2500 });
}

// A failure toast: the API's own message, prefixed by what was attempted.
export function toastError(e, what) {
  const t = i18n.global.t;
  const msg = e && e.code === 'read_only' ? t('common.readOnlyRefused') : e && e.message ? e.message : String(e);
  ElMessage({ type: 'error', message: what ? `${what}: ${msg}` : msg, showClose: true, duration: 5000 });
}
