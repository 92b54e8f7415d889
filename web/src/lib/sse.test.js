import { describe, it, expect } from 'vitest';
import { SseParser, mergeBackfill, parseEventData } from './sse.js';

describe('SseParser', () => {
  it('parses complete events', () => {
    const p = new SseParser();
    const evs = p.feed('event: task\ndata: {"action":"scheduled","id":17}\n\n');
    expect(evs).toEqual([{ event: 'task', data: '{"action":"scheduled","id":17}', id: null }]);
    expect(parseEventData(evs[0])).toEqual({ action: 'scheduled', id: 17 });
  });
  it('joins events split across chunks and CRLF line ends', () => {
    const p = new SseParser();
    expect(p.feed('event: no')).toEqual([]);
    expect(p.feed('de\r\ndata: {"a":')).toEqual([]);
    expect(p.feed('1}\r')).toEqual([]);
    expect(p.feed('\n\r\nevent: ping\ndata: {}\n\n')).toEqual([
      { event: 'node', data: '{"a":1}', id: null },
      { event: 'ping', data: '{}', id: null },
    ]);
  });
  it('ignores comments, joins data lines, keeps ids, defaults the type', () => {
    const p = new SseParser();
    const evs = p.feed(': hello\nid: 4\ndata: a\ndata: b\n\n\n');
    expect(evs).toEqual([{ event: 'message', data: 'a\nb', id: '4' }]);
  });
  it('gives null for non-JSON data', () => {
    expect(parseEventData({ data: 'nope' })).toBe(null);
  });
});

describe('mergeBackfill', () => {
  const ev = (type, id, time) => ({ type, data: { action: 'submitted', id, time } });
  it('puts the fetched events behind the streamed ones, newest first, once each', () => {
    const streamed = [{ ...ev('task', 3, '2026-12-02T10:00:03.000Z'), at: 3 }];
    const fetched = [
      ev('task', 1, '2026-12-02T10:00:01.000Z'),
      ev('ping', 0, '2026-12-02T10:00:01.500Z'),
      ev('task', 2, '2026-12-02T10:00:02.000Z'),
      ev('task', 3, '2026-12-02T10:00:03.000Z'),
    ];
    const out = mergeBackfill(streamed, fetched, 10);
    expect(out.map((e) => e.data.id)).toEqual([3, 2, 1]);
    expect(out[1].at).toBe(Date.parse('2026-12-02T10:00:02.000Z'));
  });
  it('keeps at most max entries', () => {
    const fetched = [1, 2, 3, 4].map((i) => ev('node', i, `2026-12-02T10:00:0${i}.000Z`));
    expect(mergeBackfill([], fetched, 2).map((e) => e.data.id)).toEqual([4, 3]);
  });
});
