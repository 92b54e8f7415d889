import { describe, it, expect } from 'vitest';
import {
  formatAge, formatBytes, formatDeltaPoints, formatDuration, formatFragmentation, formatLocality, formatMiB,
  formatMilli, formatPercent, formatUtilisation, fragmentationOf, ratio,
} from './format.js';

describe('bytes and MiB', () => {
  it('formats binary units', () => {
    expect(formatBytes(512)).toBe('512 B');
    expect(formatBytes(1536)).toBe('1.5 KiB');
    expect(formatMiB(512)).toBe('512 MiB');
    expect(formatMiB(81920)).toBe('80 GiB');
    expect(formatMiB(40960 + 512)).toBe('40.5 GiB');
    expect(formatMiB(null)).toBe('—');
  });
});

describe('percentages and ratios', () => {
  it('formats ratios as percentages', () => {
    expect(formatPercent(0.731)).toBe('73.1%');
    expect(formatPercent(1)).toBe('100%');
    expect(formatPercent(0)).toBe('0%');
    expect(formatPercent(undefined)).toBe('—');
    expect(formatPercent(NaN)).toBe('—');
  });
  it('guards against a zero total', () => {
    expect(ratio(1, 4)).toBe(0.25);
    expect(ratio(1, 0)).toBe(null);
  });
  it('formats a change in points', () => {
    expect(formatDeltaPoints(0.7, 0.724)).toBe('+2.4 pp');
    expect(formatDeltaPoints(0.7, 0.65)).toBe('-5 pp');
    expect(formatDeltaPoints(0.7, 0.7)).toBe('±0 pp');
    expect(formatDeltaPoints(null, 0.7)).toBe('');
  });
  it('formats milli-units', () => {
    expect(formatMilli(2500)).toBe('2.5');
    expect(formatMilli(1000)).toBe('1');
  });
  it('formats locality ids, a dash for none', () => {
    expect(formatLocality(0)).toBe('0');
    expect(formatLocality(3)).toBe('3');
    expect(formatLocality(-1)).toBe('—');
    expect(formatLocality(null)).toBe('—');
    expect(formatLocality(undefined)).toBe('—');
  });
});

describe('durations and ages', () => {
  it.each([
    [0, '0s'],
    [45, '45s'],
    [185, '3m 5s'],
    [180, '3m'],
    [7440, '2h 4m'],
    [3 * 86400 + 3600, '3d 1h'],
    [-5, '0s'],
  ])('%d s -> %s', (s, want) => expect(formatDuration(s)).toBe(want));
  it('computes ages from RFC 3339 times', () => {
    const now = Date.parse('2026-12-02T14:10:00Z');
    expect(formatAge('2026-12-02T14:00:00.123Z', now)).toBe('9m 59s');
    expect(formatAge('not a time', now)).toBe('—');
    expect(formatAge(null, now)).toBe('—');
  });
});

describe('preview summaries', () => {
  it('reads utilisation and fragmentation under either name', () => {
    expect(formatUtilisation({ gpu_allocation: 0.5 })).toBe('50%');
    expect(fragmentationOf({ gpu_fragmentation: 0.125 })).toBe(0.125);
    expect(fragmentationOf({ fragmentation: 0.2 })).toBe(0.2);
    expect(formatFragmentation({ gpu_fragmentation: 0.125 })).toBe('12.5%');
    expect(formatFragmentation({ gpu_allocation: 0.5 })).toBe('—');
    expect(formatFragmentation(null)).toBe('—');
  });
});
