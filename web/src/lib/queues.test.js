import { describe, it, expect } from 'vitest';
import {
  borrowedGpus, clusterModels, formatGpus, gpuBar, gpuQuota, queueBars, queueEventMessage, recentEvents,
  reservationMessage, treeOrder,
} from './queues.js';

// The demo cluster of examples/demo, as GET /api/v1/queues gives it.
const capacity = { gpu: { T4: 4, 'A100-80G': 16 }, cpu_milli: 288000, memory_mib: 2621440 };
const research = {
  name: 'research', parent: 'root', weight: 2, leaf: true,
  guaranteed: { gpu: { 'A100-80G': 12 } }, max: {},
  usage: { gpu: { 'A100-80G': 16 }, cpu_milli: 88000, memory_mib: 720896 },
  borrowed: { gpu: { 'A100-80G': 4 }, cpu_milli: 88000, memory_mib: 720896 },
};
const product = {
  name: 'product', parent: 'root', weight: 1, leaf: true,
  guaranteed: { gpu: { 'A100-80G': 4, T4: 4 } }, max: {},
  usage: { gpu: { T4: 3 }, cpu_milli: 32000 },
  borrowed: { gpu: {}, cpu_milli: 32000 },
};
const root = { name: 'root', parent: null, guaranteed: {}, max: {}, usage: { gpu: { 'A100-80G': 16, T4: 3 } }, borrowed: { gpu: {} } };

describe('gpuQuota', () => {
  it('reads the model, else "*", else none', () => {
    const q = { gpu: { 'A100-80G': 32, '*': 8 } };
    expect(gpuQuota(q, 'A100-80G')).toBe(32);
    expect(gpuQuota(q, 'T4')).toBe(8);
    expect(gpuQuota({ gpu: { 'A100-80G': 32 } }, 'T4')).toBeNull();
    expect(gpuQuota({}, 'T4')).toBeNull();
    expect(gpuQuota(undefined, 'T4')).toBeNull();
    expect(gpuQuota({ gpu: { T4: 0 } }, 'T4')).toBe(0);
  });
});

describe('gpuBar', () => {
  it('research borrows 4 A100s beyond its 12 guaranteed; no max: the bar ends at the cluster', () => {
    const b = gpuBar(research, 'A100-80G', capacity);
    expect(b).toMatchObject({ used: 16, guaranteed: 12, max: null, capacity: 16, end: 16, borrowed: 4 });
    expect(b.usedFrac).toBe(1);
    expect(b.withinFrac).toBe(0.75);
    expect(b.guaranteedFrac).toBe(0.75);
    expect(b.endFrac).toBe(1);
  });
  it('a model the queue neither uses nor is guaranteed: empty, no marker', () => {
    const b = gpuBar(research, 'T4', capacity);
    expect(b).toMatchObject({ used: 0, guaranteed: 0, max: null, end: 4, borrowed: 0, usedFrac: 0, guaranteedFrac: null });
  });
  it('within the guarantee nothing is borrowed', () => {
    const b = gpuBar(product, 'T4', capacity);
    expect(b).toMatchObject({ used: 3, guaranteed: 4, borrowed: 0, usedFrac: 0.75, withinFrac: 0.75, guaranteedFrac: 1 });
  });
  it('a max ends the bar; "*" applies to models not named', () => {
    const q = { guaranteed: { gpu: { '*': 2 } }, max: { gpu: { T4: 3, '*': 8 } }, usage: { gpu: { 'A100-80G': 5 } } };
    const a = gpuBar(q, 'A100-80G', capacity);
    expect(a).toMatchObject({ used: 5, guaranteed: 2, max: 8, end: 8, borrowed: 3 }); // no `borrowed` in q: used beyond guaranteed
    expect(a.usedFrac).toBeCloseTo(5 / 8);
    expect(a.guaranteedFrac).toBeCloseTo(2 / 8);
    expect(a.withinFrac).toBeCloseTo(2 / 8);
    const t = gpuBar(q, 'T4', capacity);
    expect(t).toMatchObject({ max: 3, end: 3, guaranteed: 2 });
    expect(t.endFrac).toBe(1);
  });
  it('a guarantee above the cluster widens the scale; the end is marked inside it', () => {
    const q = { guaranteed: { gpu: { T4: 8 } }, usage: { gpu: { T4: 2 } }, borrowed: { gpu: {} } };
    const b = gpuBar(q, 'T4', capacity);
    expect(b.end).toBe(4);
    expect(b.guaranteedFrac).toBe(1);
    expect(b.endFrac).toBe(0.5);
    expect(b.usedFrac).toBe(0.25);
  });
  it('root: no guarantee, nothing borrowed, used against the cluster', () => {
    const b = gpuBar(root, 'T4', capacity);
    expect(b).toMatchObject({ used: 3, guaranteed: 0, borrowed: 0, end: 4, guaranteedFrac: null, usedFrac: 0.75, withinFrac: 0.75 });
  });
  it('the borrowed part of the fill is what the server counts as borrowed', () => {
    const q = { guaranteed: {}, usage: { gpu: { T4: 2 } }, borrowed: { gpu: { T4: 2 } } };
    expect(gpuBar(q, 'T4', capacity)).toMatchObject({ used: 2, borrowed: 2, usedFrac: 0.5, withinFrac: 0 });
  });
  it('fractional GPUs and missing data', () => {
    const b = gpuBar({ usage: { gpu: { T4: 0.5 } } }, 'T4', capacity);
    expect(b.used).toBe(0.5);
    expect(b.usedFrac).toBe(0.125);
    const e = gpuBar({}, 'H100', {});
    expect(e).toMatchObject({ used: 0, end: 0, usedFrac: 0, endFrac: 0, guaranteedFrac: null });
  });
});

describe('queueBars and borrowedGpus', () => {
  it('one bar per model of the cluster, sorted', () => {
    expect(clusterModels(capacity)).toEqual(['A100-80G', 'T4']);
    expect(queueBars(product, capacity).map((b) => [b.model, b.used, b.guaranteed])).toEqual([['A100-80G', 0, 4], ['T4', 3, 4]]);
    expect(queueBars(product, {})).toEqual([]);
  });
  it('sums borrowed GPUs over the models', () => {
    expect(borrowedGpus(research)).toBe(4);
    expect(borrowedGpus(product)).toBe(0);
    expect(borrowedGpus({ borrowed: { gpu: { a: 1.5, b: 2 } } })).toBe(3.5);
    expect(borrowedGpus({})).toBe(0);
  });
});

describe('treeOrder', () => {
  it('puts children under their parent with their depth', () => {
    const qs = [
      { name: 'root', parent: null },
      { name: 'team-a', parent: 'root' },
      { name: 'default', parent: 'root' },
      { name: 'a-train', parent: 'team-a' },
      { name: 'a-eval', parent: 'team-a' },
    ];
    expect(treeOrder(qs).map((x) => `${'  '.repeat(x.depth)}${x.queue.name}${x.hasChildren ? '/' : ''}`)).toEqual([
      'root/', '  team-a/', '    a-train', '    a-eval', '  default',
    ]);
  });
  it('a child listed before its parent still goes under it', () => {
    const qs = [{ name: 'b', parent: 'a' }, { name: 'root', parent: null }, { name: 'a', parent: 'root' }];
    expect(treeOrder(qs).map((x) => [x.queue.name, x.depth])).toEqual([['root', 0], ['a', 1], ['b', 2]]);
  });
  it('a missing parent or a cycle never loses or repeats a queue', () => {
    const qs = [{ name: 'root', parent: null }, { name: 'orphan', parent: 'gone' }, { name: 'x', parent: 'y' }, { name: 'y', parent: 'x' }];
    const out = treeOrder(qs);
    expect(out.map((x) => x.queue.name).sort()).toEqual(['orphan', 'root', 'x', 'y']);
    expect(out.find((x) => x.queue.name === 'orphan').depth).toBe(0);
    expect(treeOrder(undefined)).toEqual([]);
  });
});

describe('formatting', () => {
  it('formats GPU counts', () => {
    expect(formatGpus(16)).toBe('16');
    expect(formatGpus(0.5)).toBe('0.5');
    expect(formatGpus(2.256)).toBe('2.26');
    expect(formatGpus(undefined)).toBe('—');
  });
  it('describes events', () => {
    expect(queueEventMessage({ action: 'reclaimed', queue: 'research', by_queue: 'product', task: 3, task_name: 'sweep', for_task: 9, for_task_name: 'eval' }))
      .toEqual({ key: 'queues.event.reclaimed', params: { task: 'sweep (#3)', queue: 'research', byQueue: 'product', forTask: 'eval (#9)' } });
    expect(queueEventMessage({ action: 'created', queue: 'x', by: 'admin' })).toEqual({ key: 'queues.event.createdBy', params: { queue: 'x', by: 'admin' } });
    expect(queueEventMessage({ action: 'deleted', queue: 'x' }).key).toBe('queues.event.deleted');
    expect(queueEventMessage({ action: 'odd', queue: 'x' })).toEqual({ key: 'queues.event.other', params: { action: 'odd', queue: 'x' } });
  });
  it('lists the newest events first', () => {
    const ev = [{ time_ms: 1, a: 1 }, { time_ms: 3, a: 2 }, { time_ms: 3, a: 3 }, { time_ms: 2, a: 4 }];
    expect(recentEvents(ev).map((e) => e.a)).toEqual([3, 2, 4, 1]);
    expect(recentEvents(ev, 2).map((e) => e.a)).toEqual([3, 2]);
    expect(recentEvents(undefined)).toEqual([]);
  });
});

describe('reservationMessage', () => {
  it('names the start and each held node with its members', () => {
    expect(reservationMessage({ start: '2026-12-05T08:00:00Z', nodes: [{ node: 'n1', members: 1 }, { node: 'n2', members: 2 }] }))
      .toEqual({ key: 'queues.reservation', params: { start: '2026-12-05T08:00:00Z', nodes: 'n1 (1), n2 (2)' } });
  });
  it('is null without a reservation', () => {
    expect(reservationMessage(null)).toBeNull();
    expect(reservationMessage(undefined)).toBeNull();
    expect(reservationMessage({ start: 'x' })).toBeNull();
  });
});
