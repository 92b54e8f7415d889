import { describe, it, expect } from 'vitest';
import en from '../i18n/en.js';
import zh from '../i18n/zh-CN.js';

function keys(obj, prefix = '') {
  return Object.entries(obj).flatMap(([k, v]) => (v && typeof v === 'object' ? keys(v, `${prefix}${k}.`) : [`${prefix}${k}`]));
}

describe('messages', () => {
  it('en and zh-CN have the same keys', () => {
    expect(keys(zh).sort()).toEqual(keys(en).sort());
  });
  it('use the page titles of the contract', () => {
    expect(en.nav).toMatchObject({ overview: 'Overview', plugins: 'Plugins', config: 'Scheduler config', inference: 'Inference', nodes: 'Nodes', tasks: 'Tasks', jobs: 'Jobs', queues: 'Queues' });
    expect(zh.nav).toMatchObject({ overview: '概览', plugins: '插件管理', config: '调度器配置', inference: '推理控制面板', nodes: '节点', tasks: '任务', jobs: '作业', queues: '队列' });
  });
  it('name plugin states as the contract does', () => {
    expect(zh.states.plugin).toEqual({ active: '已启用', inactive: '未启用', error: '错误', configuring: '配置中' });
    expect(en.states.plugin).toEqual({ active: 'active', inactive: 'inactive', error: 'error', configuring: 'configuring' });
  });
  it('have no empty messages', () => {
    for (const m of [en, zh]) for (const k of keys(m)) expect(k.split('.').reduce((o, p) => o[p], m)).not.toBe('');
  });
});
