import { describe, it, expect, vi } from 'vitest';
import { initialLang, langFromNavigator, otherLang } from './lang.js';
import { throttle } from './throttle.js';
import { permissionsFor } from './session.js';

describe('language', () => {
  it('defaults from navigator.language', () => {
    expect(langFromNavigator('zh-CN')).toBe('zh-CN');
    expect(langFromNavigator('zh-TW')).toBe('zh-CN');
    expect(langFromNavigator('zh')).toBe('zh-CN');
    expect(langFromNavigator('en-US')).toBe('en');
    expect(langFromNavigator('de')).toBe('en');
    expect(langFromNavigator(undefined)).toBe('en');
  });
  it('prefers a stored choice', () => {
    expect(initialLang('en', 'zh-CN')).toBe('en');
    expect(initialLang('fr', 'zh-CN')).toBe('zh-CN');
    expect(otherLang('en')).toBe('zh-CN');
    expect(otherLang('zh-CN')).toBe('en');
  });
});

describe('throttle', () => {
  it('runs at once, then folds calls into one trailing call', () => {
    let t = 0;
    const timers = [];
    const fn = vi.fn();
    const th = throttle(fn, 100, { now: () => t, setTimer: (f, d) => timers.push({ f, at: t + d }), clearTimer: () => {} });
    th(1);
    expect(fn).toHaveBeenCalledTimes(1);
    t = 10;
    th(2);
    th(3);
    expect(fn).toHaveBeenCalledTimes(1);
    expect(timers).toHaveLength(1);
    expect(timers[0].at).toBe(100);
    t = 100;
    timers[0].f();
    expect(fn).toHaveBeenCalledTimes(2);
    expect(fn).toHaveBeenLastCalledWith(3);
  });
});

describe('permissions', () => {
  it('follows the server roles', () => {
    expect(permissionsFor('admin')).toEqual({ readOnly: false, writeConfig: true, writeTasks: true, cordonNodes: true, preview: true });
    expect(permissionsFor('operator')).toEqual({ readOnly: false, writeConfig: false, writeTasks: true, cordonNodes: true, preview: true });
    expect(permissionsFor('viewer').readOnly).toBe(true);
    expect(permissionsFor('viewer').writeTasks).toBe(false);
    expect(permissionsFor('viewer').preview).toBe(false);
  });
});

import { countByCondition, describeEvent, gpusByModel, withAllocatedMilli } from './cluster.js';

describe('cluster aggregations', () => {
  it('counts nodes by condition', () => {
    expect(countByCondition([{ condition: 'Ready' }, { condition: 'Ready' }, { condition: 'Draining' }])).toEqual({ Ready: 2, NotReady: 0, Draining: 1 });
  });
  it('sums GPUs by model, measured values only where measured', () => {
    const gpus = [
      { node: 'a', index: 0, model: 'A100', memory_total_mib: 80000, memory_allocated_mib: 40000, memory_used_mib: 20000, utilization: 0.5 },
      { node: 'a', index: 1, model: 'A100', memory_total_mib: 80000, memory_allocated_mib: 0, memory_used_mib: null, utilization: null },
      { node: 't', index: 0, model: 'T4', memory_total_mib: 16000, memory_allocated_mib: 0, memory_used_mib: null, utilization: null },
    ];
    const nodes = [{ name: 'a', gpus: [{ index: 0, allocated_milli: 1000 }, { index: 1, allocated_milli: 500 }] }];
    const rows = gpusByModel(withAllocatedMilli(gpus, nodes));
    expect(rows[0]).toMatchObject({ model: 'A100', count: 2, allocated: 0.75, memory_allocated: 0.25, memory_used_mib: 20000, utilization: 0.5 });
    expect(rows[1]).toMatchObject({ model: 'T4', count: 1, allocated: 0, memory_used: null, utilization: null });
  });
  it('describes events', () => {
    expect(describeEvent('task', { action: 'scheduled', id: 17, name: 'train-a', node: 'gpu-a1' })).toBe('scheduled train-a (#17) → gpu-a1');
    expect(describeEvent('plugin', { action: 'updated', name: 'binpack', by: 'admin' })).toBe('updated binpack (admin)');
    expect(describeEvent('node', null)).toBe('node');
  });
});

import { requestSummary, waitReason } from './cluster.js';
describe('waitReason', () => {
  it('says why a pending or scheduled task waits, and nothing for the others', () => {
    expect(waitReason({ state: 'pending', pending_reason: '0/4 nodes available: 4 insufficient GPU' })).toBe('0/4 nodes available: 4 insufficient GPU');
    expect(waitReason({ state: 'scheduled', pending_reason: 'waiting for task 12 to exit (it holds GPU 0)' })).toBe('waiting for task 12 to exit (it holds GPU 0)');
    expect(waitReason({ state: 'scheduled', pending_reason: '' })).toBe('');
    expect(waitReason({ state: 'running', pending_reason: 'stale' })).toBe('');
  });
});
describe('requestSummary', () => {
  it('says what a task asks for', () => {
    expect(requestSummary({ requests: { gpu: 2, gpu_milli: 1000, gpu_models: ['A100-80G'], cpu_milli: 8000, memory_mib: 65536 }, rdma_required: true }))
      .toBe('2× GPU · A100-80G · 8 CPU · 65536 MiB · RDMA');
    expect(requestSummary({ requests: { gpu: 1, gpu_milli: 500, gpu_memory_mib: 7168 } })).toBe('1× GPU (500m) · 7168 MiB GPU mem');
    expect(requestSummary({})).toBe('—');
  });
  it('names the vendors a task asks for, before its models', () => {
    const task = { requests: { gpu: 2, gpu_vendors: ['huawei', 'acme'], gpu_models: ['Ascend910B'], cpu_milli: 8000 } };
    expect(requestSummary(task)).toBe('2× GPU · huawei|acme · Ascend910B · 8 CPU');
    const names = { huawei: 'Huawei Ascend' };
    expect(requestSummary(task, undefined, (v) => names[v] || v)).toBe('2× GPU · Huawei Ascend|acme · Ascend910B · 8 CPU');
    expect(requestSummary({ requests: { gpu: 1, gpu_vendors: [], gpu_models: [] } })).toBe('1× GPU');
  });
});

import { measuredGpus, nodeGpus } from './cluster.js';
describe('node GPUs', () => {
  const nodes = [
    { name: 'a', gpus: [
      { index: 0, model: 'A100', memory_mib: 81920, allocated_milli: 1000, allocated_memory_mib: 81920, utilization: 0.9, memory_used_mib: 60000 },
      { index: 1, model: 'A100', memory_mib: 81920, allocated_milli: 0, allocated_memory_mib: 0, utilization: null, memory_used_mib: null },
    ] },
    { name: 'c', gpus: [] },
  ];
  it('takes the allocated memory as the server gives it (a whole GPU counts whole)', () => {
    const rows = gpusByModel(nodeGpus(nodes));
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      model: 'A100', count: 2, allocated: 0.5, memory_total_mib: 163840, memory_allocated_mib: 81920,
      memory_allocated: 0.5, memory_used_mib: 60000, utilization: 0.9,
    });
  });
  it('sums what was measured, null when nothing was', () => {
    expect(measuredGpus(nodes[0])).toEqual({ utilization: 0.9, memory_used_mib: 60000 });
    expect(measuredGpus(nodes[1])).toBe(null);
    expect(measuredGpus({ gpus: [{ utilization: null, memory_used_mib: null }] })).toBe(null);
  });
});

import { roleLabel } from './session.js';
import zhMessages from '../i18n/zh-CN.js';
import enMessages from '../i18n/en.js';
describe('roleLabel', () => {
  const translator = (msgs) => (k) => k.split('.').reduce((o, p) => (o ? o[p] : undefined), msgs) ?? k;
  it('translates the known roles, keeps an unknown one raw', () => {
    const t = translator(zhMessages);
    expect(['admin', 'operator', 'viewer', 'agent'].map((r) => roleLabel(r, translator(enMessages)))).toEqual(['admin', 'operator', 'viewer', 'agent']);
    expect(['admin', 'operator', 'viewer', 'agent'].map((r) => roleLabel(r, t))).toEqual(['管理员', '操作员', '只读', '代理']);
    expect(roleLabel('auditor', t)).toBe('auditor');
    expect(roleLabel(undefined, t)).toBe('');
  });
});
