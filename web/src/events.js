// The live event stream (GET /api/v1/events). EventSource cannot send the
// Authorization header, so the stream is read with fetch() and a
// ReadableStream reader, parsed by SseParser, and fanned out to the pages
// that subscribed. It reconnects with backoff while a session is open.
import { reactive } from 'vue';
import { LISTED_TYPES, SseParser, mergeBackfill, parseEventData } from './lib/sse.js';
import { session } from './store.js';

export const live = reactive({
  state: 'offline', // connecting | live | offline
  recent: [], // newest first: {type, data, at}
});

const MAX_RECENT = 50;
const listeners = new Set();
let controller = null;
let retry = 0;
let retryTimer = null;

export function onEvent(fn) {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

function dispatch(type, data) {
  if (LISTED_TYPES.includes(type)) {
    live.recent.unshift({ type, data, at: Date.now() });
    if (live.recent.length > MAX_RECENT) live.recent.length = MAX_RECENT;
  }
  for (const fn of listeners) {
    try {
      fn(type, data);
    } catch (e) {
      console.error('event listener failed', e);
    }
  }
}

// What happened before this page subscribed (GET /api/v1/events/recent).
async function backfill(signal) {
  try {
    const res = await fetch(`/api/v1/events/recent?limit=${MAX_RECENT}`, {
      headers: { Authorization: `Bearer ${session.token}` },
      signal,
      cache: 'no-store',
    });
    if (!res.ok) return;
    const body = await res.json();
    live.recent = mergeBackfill(live.recent, body.events || [], MAX_RECENT);
  } catch {
    // Recent activity is a convenience; the stream goes on without it.
  }
}

async function connect() {
  if (!session.token) return;
  const ctl = new AbortController();
  controller = ctl;
  live.state = 'connecting';
  try {
    const res = await fetch('/api/v1/events', {
      headers: { Authorization: `Bearer ${session.token}`, Accept: 'text/event-stream' },
      signal: ctl.signal,
      cache: 'no-store',
    });
    if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
    live.state = 'live';
    retry = 0;
    backfill(ctl.signal);
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    const parser = new SseParser();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      for (const ev of parser.feed(decoder.decode(value, { stream: true }))) {
        dispatch(ev.event, parseEventData(ev));
      }
    }
    throw new Error('stream ended');
  } catch (e) {
    if (ctl.signal.aborted) return;
    live.state = 'offline';
    const delay = Math.min(30000, 1000 * 2 ** retry++);
    retryTimer = setTimeout(connect, delay);
  }
}

export function startEvents() {
  if (controller && !controller.signal.aborted) return;
  retry = 0;
  connect();
}

export function stopEvents() {
  if (retryTimer) clearTimeout(retryTimer);
  retryTimer = null;
  if (controller) controller.abort();
  controller = null;
  live.state = 'offline';
  live.recent.length = 0;
}
