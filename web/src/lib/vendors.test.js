import { describe, it, expect } from 'vitest';
import en from '../i18n/en.js';
import zh from '../i18n/zh-CN.js';
import {
  clusterVendors, gpuVendor, hasVendor, KNOWN_VENDORS, nodeVendors, sortVendors, vendorFromQuery, vendorLabel, vendorTagType,
} from './vendors.js';

// vue-i18n's t over a message table, enough for vendorLabel.
const tOf = (messages) => (key) => key.split('.').reduce((o, k) => (o ? o[k] : undefined), messages) ?? key;

const ascend = { name: 'ascend-1', gpus: [{ index: 0, vendor: 'huawei' }, { index: 1, vendor: 'huawei' }] };
const a100 = { name: 'a100-1', gpus: [{ index: 0, vendor: 'nvidia' }] };
const mixed = { name: 'mixed', gpus: [{ index: 0, vendor: 'habana' }, { index: 1, vendor: 'acme' }, { index: 2, vendor: 'amd' }, { index: 3, vendor: 'nvidia' }] };
const cpu = { name: 'cpu-1', gpus: [] };

describe('vendors', () => {
  it('takes a device without a vendor as NVIDIA, as the server does', () => {
    expect(gpuVendor({ vendor: 'amd' })).toBe('amd');
    expect(gpuVendor({})).toBe('nvidia');
    expect(gpuVendor({ vendor: '' })).toBe('nvidia');
  });
  it('orders known vendors as discovery does, then others by name, once each', () => {
    expect(sortVendors(['zeta', 'habana', 'acme', 'nvidia', 'huawei', 'amd', 'nvidia'])).toEqual(['nvidia', 'amd', 'huawei', 'habana', 'acme', 'zeta']);
  });
  it('gives a node its distinct vendors, none for a CPU-only node', () => {
    expect(nodeVendors(ascend)).toEqual(['huawei']);
    expect(nodeVendors(mixed)).toEqual(['nvidia', 'amd', 'habana', 'acme']);
    expect(nodeVendors(cpu)).toEqual([]);
    expect(nodeVendors({ name: 'bare' })).toEqual([]);
  });
  it('gives the cluster the vendors present on any node', () => {
    expect(clusterVendors([cpu, ascend, a100])).toEqual(['nvidia', 'huawei']);
    expect(clusterVendors([])).toEqual([]);
    expect(clusterVendors(undefined)).toEqual([]);
  });
  it('filters nodes to those with a device of the vendor', () => {
    const nodes = [a100, ascend, cpu, mixed];
    expect(nodes.filter((n) => hasVendor(n, 'huawei')).map((n) => n.name)).toEqual(['ascend-1']);
    expect(nodes.filter((n) => hasVendor(n, 'nvidia')).map((n) => n.name)).toEqual(['a100-1', 'mixed']);
    expect(nodes.filter((n) => hasVendor(n, 'acme')).map((n) => n.name)).toEqual(['mixed']);
    expect(nodes.filter((n) => hasVendor(n, '')).map((n) => n.name)).toEqual(['a100-1', 'ascend-1', 'cpu-1', 'mixed']);
  });
  it('reads the filter from the URL query only when it is a vendor name', () => {
    expect(vendorFromQuery('huawei')).toBe('huawei');
    expect(vendorFromQuery(['amd', 'nvidia'])).toBe('amd');
    expect(vendorFromQuery(undefined)).toBe('');
    expect(vendorFromQuery('')).toBe('');
    expect(vendorFromQuery('Huawei')).toBe('');
    expect(vendorFromQuery('a'.repeat(33))).toBe('');
    expect(vendorFromQuery('<script>')).toBe('');
  });
  it('shows display names in both languages and unknown vendors as named', () => {
    expect(KNOWN_VENDORS.map((v) => vendorLabel(v, tOf(en)))).toEqual(['NVIDIA', 'AMD', 'Huawei Ascend', 'Intel Gaudi']);
    expect(vendorLabel('huawei', tOf(zh))).toBe('华为昇腾');
    expect(vendorLabel('habana', tOf(zh))).toBe('英特尔 Gaudi');
    expect(vendorLabel('acme', tOf(en))).toBe('acme');
    expect(vendorLabel('acme', tOf(zh))).toBe('acme');
  });
  it('gives each known vendor a tag colour of its own', () => {
    const types = KNOWN_VENDORS.map(vendorTagType);
    expect(new Set(types).size).toBe(KNOWN_VENDORS.length);
    expect(vendorTagType('acme')).toBe('info');
  });
});
