import { describe, it, expect } from 'vitest';
import { SseParser, affectedResources, parseEventData } from './sse.js';

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

describe('affectedResources', () => {
  it('maps event types to what to reload', () => {
    expect(affectedResources('task')).toContain('tasks');
    expect(affectedResources('node')).toContain('nodes');
    expect(affectedResources('plugin')).toContain('plugins');
    expect(affectedResources('ping')).toEqual([]);
  });
});
