import { describe, it, expect } from 'vitest';
import { configPatch, fieldFromApiMessage, validateConfig, validateThreshold, validateWeight } from './validate.js';

describe('validateThreshold', () => {
  it.each([
    ['0.8', null],
    [1, null],
    ['1', null],
    ['0.0001', null],
    ['0', 'validation.thresholdRange'],
    [0, 'validation.thresholdRange'],
    ['1.01', 'validation.thresholdRange'],
    ['-0.5', 'validation.thresholdRange'],
    ['', 'validation.required'],
    [null, 'validation.required'],
    ['abc', 'validation.notNumber'],
    ['0x1', 'validation.notNumber'],
    ['Infinity', 'validation.notNumber'],
  ])('%j -> %j', (v, want) => expect(validateThreshold(v)).toBe(want));
});

describe('validateWeight', () => {
  it.each([
    ['0', null],
    ['3', null],
    [2.5, null],
    ['-1', 'validation.weightRange'],
    ['', 'validation.required'],
    ['x', 'validation.notNumber'],
  ])('%j -> %j', (v, want) => expect(validateWeight(v)).toBe(want));
});

describe('validateConfig', () => {
  it('names each bad field', () => {
    const errors = validateConfig({
      load_threshold: '0.8',
      gpu_load_threshold: '2',
      memory_threshold: '',
      weights: { binpack: '1', rdma: '-2' },
    });
    expect(errors).toEqual({
      gpu_load_threshold: 'validation.thresholdRange',
      memory_threshold: 'validation.required',
      'weight-rdma': 'validation.weightRange',
    });
  });
});

describe('configPatch', () => {
  it('sends only what changed', () => {
    const saved = { load_threshold: 0.8, gpu_load_threshold: 0.9, memory_threshold: 0.85, score_weights: { binpack: 1, rdma: 1 } };
    const form = { load_threshold: '0.8', gpu_load_threshold: '0.95', memory_threshold: 0.85, weights: { binpack: '1', rdma: '2' } };
    expect(configPatch(form, saved)).toEqual({ gpu_load_threshold: 0.95, score_weights: { rdma: 2 } });
    expect(configPatch({ ...form, gpu_load_threshold: '0.9', weights: { binpack: 1, rdma: 1 } }, saved)).toEqual({});
  });
});

describe('fieldFromApiMessage', () => {
  it('finds the field the server names', () => {
    expect(fieldFromApiMessage('load_threshold must be a number in (0, 1]')).toBe('load_threshold');
    expect(fieldFromApiMessage('gpu_load_threshold must be a number in (0, 1]')).toBe('gpu_load_threshold');
    expect(fieldFromApiMessage('score_weights.binpack must be a finite number >= 0')).toBe('weight-binpack');
    expect(fieldFromApiMessage('something else')).toBe(null);
  });
});
