import { describe, it, expect } from 'vitest';
import {
  conflictPair, extensionPoints, sortPlugins,
  applySteps, candidateFromPlugins, isMoved, movedTasks, nodeBreakdown, policyDiff, previewBody, summarize, totalScore, DEFAULT_WORKLOAD,
} from './preview.js';

const plugins = [
  { name: 'binpack', enabled: true, weight: 1, required: false },
  { name: 'spread', enabled: false, weight: 1, required: false },
  { name: 'preempt', enabled: true, weight: 1, mode: 'scheduled', modes: ['disabled', 'scheduled', 'running'] },
  { name: 'fit', enabled: true, weight: null, required: true },
];

describe('candidate and diff', () => {
  it('prefills the candidate from the current plugins', () => {
    const c = candidateFromPlugins(plugins);
    expect(c.binpack).toEqual({ enabled: true, weight: 1 });
    expect(c.preempt.mode).toBe('scheduled');
    // A filter has no weight to edit.
    expect(c.fit).toEqual({ enabled: true });
    expect(policyDiff(plugins, c)).toEqual({});
  });
  it('keeps only what changed', () => {
    const c = candidateFromPlugins(plugins);
    c.binpack.enabled = false;
    c.spread.enabled = true;
    c.spread.weight = '2';
    c.preempt.mode = 'running';
    c.fit.enabled = false; // required: never sent
    expect(policyDiff(plugins, c)).toEqual({
      binpack: { enabled: false },
      spread: { enabled: true, weight: 2 },
      preempt: { mode: 'running' },
    });
  });
  it('builds the preview body with the workload', () => {
    expect(DEFAULT_WORKLOAD).toBe('cluster');
    expect(previewBody({})).toEqual({ explain: true, workload: 'cluster' });
    expect(previewBody({}, 'pending')).toEqual({ explain: true, workload: 'pending' });
    expect(previewBody({ rdma: { weight: 3 } }, 'cluster')).toEqual({ explain: true, workload: 'cluster', plugins: { rdma: { weight: 3 } } });
    // The removed client-side sample, or anything unknown, is not sent.
    expect(previewBody({}, 'sample')).toEqual({ explain: true, workload: 'cluster' });
    expect(previewBody({}, 'sample')).not.toHaveProperty('tasks');
  });
  it('applies disables first, then enables', () => {
    const steps = applySteps({ spread: { enabled: true }, preempt: { mode: 'running' }, binpack: { enabled: false } });
    expect(steps.map((s) => s[0])).toEqual(['binpack', 'preempt', 'spread']);
  });
});

describe('moved tasks', () => {
  const tasks = [
    { name: 'a', current: { node: 'n1', gpus: [0] }, candidate: { node: 'n1', gpus: [0] } },
    { name: 'b', current: { node: 'n1', gpus: [0] }, candidate: { node: 'n2', gpus: [0] } },
    { name: 'c', current: { node: null }, candidate: { node: 'n2', gpus: [1] } },
    { name: 'd', current: { node: 'n1', gpus: [0, 1] }, candidate: { node: 'n1', gpus: [2, 3] } },
    { name: 'e', current: { node: null }, candidate: { node: null } },
  ];
  it('finds tasks placed differently', () => {
    expect(movedTasks(tasks).map((t) => t.name)).toEqual(['b', 'c', 'd']);
    expect(isMoved({})).toBe(false);
  });
  it('uses the server count when given', () => {
    expect(summarize({ moved: 7, tasks }).moved).toBe(7);
    expect(summarize({ tasks }).moved).toBe(3);
    expect(summarize(null)).toBe(null);
  });
});

describe('node breakdown', () => {
  it('lists plugins that scored on either side', () => {
    const task = {
      nodes: [
        { node: 'n1', current: { feasible: true, scores: { binpack: { raw: 80, weighted: 80 } } }, candidate: { feasible: true, scores: { spread: { raw: 20, weighted: 40 } } } },
        { node: 'n2', current: { feasible: false, reason: 'insufficient GPU' } },
      ],
    };
    const b = nodeBreakdown(task);
    expect(b.plugins).toEqual(['binpack', 'spread']);
    expect(b.rows[1].candidate).toBe(null);
    expect(totalScore(b.rows[0].candidate)).toBe(40);
    expect(totalScore(null)).toBe(null);
    expect(totalScore({ feasible: false, scores: {} })).toBe(null);
  });
});

describe('plugin helpers', () => {
  it('trusts the per-task moved flag', () => {
    expect(isMoved({ moved: false, current: { node: 'a' }, candidate: { node: 'b' } })).toBe(false);
    expect(isMoved({ moved: true })).toBe(true);
  });
  it('sorts plugins in the vision order', () => {
    const names = sortPlugins([{ name: 'fit' }, { name: 'zeta' }, { name: 'spread' }, { name: 'binpack' }]).map((p) => p.name);
    expect(names).toEqual(['binpack', 'spread', 'fit', 'zeta']);
  });
  it('reads extension points as a string or a list', () => {
    expect(extensionPoints({ extension_points: 'Score,Bind' })).toEqual(['Score', 'Bind']);
    expect(extensionPoints({ extension_points: ['Filter'] })).toEqual(['Filter']);
    expect(extensionPoints({})).toEqual([]);
  });
  it('finds the plugin a conflict names', () => {
    expect(conflictPair('spread', 'cannot enable spread while binpack is enabled', ['binpack', 'spread', 'rdma'])).toEqual(['binpack', 'spread']);
    expect(conflictPair('binpack', 'spread is enabled', ['binpack', 'spread'])).toEqual(['binpack', 'spread']);
    expect(conflictPair('rdma', 'nothing', ['binpack', 'spread'])).toBe(null);
  });
});

import { gpuLabel, gpusText } from './preview.js';
describe('gpu labels', () => {
  it('reads indexes and allocation objects', () => {
    expect(gpuLabel(3)).toBe('3');
    expect(gpuLabel({ index: 1, milli: 500, memory_mib: 0 })).toBe('1(500m)');
    expect(gpuLabel({ index: 2, milli: 1000 })).toBe('2');
    expect(gpusText({ gpus: [{ index: 0, milli: 1000 }, { index: 1, milli: 1000 }] })).toBe('0,1');
    expect(gpusText(null)).toBe('');
  });
  it('sees a move between GPUs of one node without the flag', () => {
    expect(isMoved({ current: { node: 'n', gpus: [{ index: 0, milli: 500 }] }, candidate: { node: 'n', gpus: [{ index: 1, milli: 500 }] } })).toBe(true);
  });
});
