// An incremental parser of the text/event-stream format (the subset the
// server sends: "event:", "data:", "id:" lines, ":" comments, blank line
// ends an event). Feed it decoded chunks as they arrive; lines may be split
// across chunks and end in \n, \r\n or \r.

export class SseParser {
  constructor() {
    this.buffer = '';
    this.reset();
  }

  reset() {
    this.event = '';
    this.data = [];
    this.id = null;
  }

  // Returns the events completed by this chunk: [{event, data, id}], where
  // data is the raw text (several data lines joined by "\n").
  feed(chunk) {
    this.buffer += chunk;
    const out = [];
    for (;;) {
      const m = this.buffer.match(/\r\n|\n|\r/);
      if (!m) break;
      // A lone \r at the very end may be the first half of \r\n.
      if (m[0] === '\r' && m.index === this.buffer.length - 1) break;
      const line = this.buffer.slice(0, m.index);
      this.buffer = this.buffer.slice(m.index + m[0].length);
      const ev = this.line(line);
      if (ev) out.push(ev);
    }
    return out;
  }

  line(line) {
    if (line === '') {
      if (!this.data.length && !this.event) return null;
      const ev = { event: this.event || 'message', data: this.data.join('\n'), id: this.id };
      this.reset();
      return ev;
    }
    if (line.startsWith(':')) return null;
    const i = line.indexOf(':');
    const field = i < 0 ? line : line.slice(0, i);
    let value = i < 0 ? '' : line.slice(i + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') this.event = value;
    else if (field === 'data') this.data.push(value);
    else if (field === 'id') this.id = value;
    return null;
  }
}

// The JSON payload of an event, or null when it is not JSON.
export function parseEventData(ev) {
  try {
    return JSON.parse(ev.data);
  } catch {
    return null;
  }
}

// The event types the UI lists as recent activity.
export const LISTED_TYPES = ['task', 'node', 'plugin', 'config'];

// Adds the events of GET /api/v1/events/recent (oldest first) behind the ones
// the stream already delivered (`recent`, newest first): an event both gave
// is kept once. Returns a new list, newest first, of at most `max` entries.
export function mergeBackfill(recent, fetched, max) {
  const key = (type, data) => `${type}\u0000${JSON.stringify(data)}`;
  const seen = new Set(recent.map((e) => key(e.type, e.data)));
  const older = [];
  for (let i = fetched.length - 1; i >= 0; i--) {
    const e = fetched[i];
    if (!LISTED_TYPES.includes(e.type) || seen.has(key(e.type, e.data))) continue;
    seen.add(key(e.type, e.data));
    const at = Date.parse(e.data && e.data.time);
    older.push({ type: e.type, data: e.data, at: Number.isNaN(at) ? Date.now() : at });
  }
  return [...recent, ...older].slice(0, max);
}
