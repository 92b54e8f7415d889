import { describe, it, expect } from 'vitest';
import {
  autoscalingSummary, checkNumber, curlExample, emptyModelForm, formFromModel, gpuChartHeight, gpuMemoryRows,
  modelBody, modelFieldFromApiMessage, parseCommand, parseEnv, statusTagType, validateModelForm,
} from './inference.js';

const VIEW = {
  name: 'chat-7b', model: 'Qwen/Qwen2-7B', command: ['python3', '/x/fake_model.py', '--port', '{port}'],
  env: { A: '1', B: 'x=y' }, health_path: '/health',
  requests: { gpu: 1, gpu_milli: 1, gpu_memory_mib: 1024, gpu_models: ['T4'], cpu_milli: 500, memory_mib: 1024 },
  priority: 5, preemptible: false, placement: 'pack', min_replicas: 1, max_replicas: 3, startup_timeout_s: 300,
  autoscaling: { target_inflight_per_replica: 2, upscale_delay_s: 1, downscale_delay_s: 30, window_s: 5, queue_size: 10, cold_start_timeout_s: 60 },
  revision: 3, status: 'running', replicas: [], endpoints: [], last_decision: null,
};

function validForm() {
  return { ...emptyModelForm(), name: 'chat', command: 'python3\nserve.py\n--port\n{port}' };
}

describe('statusTagType', () => {
  it.each([
    ['running', 'success'], ['deploying', 'primary'], ['scaling', 'primary'], ['degraded', 'warning'],
    ['failed', 'danger'], ['stopped', 'info'], ['whatever', 'info'], [undefined, 'info'],
  ])('%s -> %s', (s, want) => expect(statusTagType(s)).toBe(want));
});

describe('command and env', () => {
  it('takes one argument per line, trimmed, blank lines dropped', () => {
    expect(parseCommand('python3\n  serve.py \n\n--port\r\n{port}\n')).toEqual(['python3', 'serve.py', '--port', '{port}']);
    expect(parseCommand('')).toEqual([]);
  });
  it('reads KEY=VALUE lines, the value may hold "="', () => {
    expect(parseEnv('A=1\n\n# note\nB = x=y\nC=')).toEqual({ env: { A: '1', B: ' x=y', C: '' }, bad: 0 });
    expect(parseEnv('A=1\nnot a pair').bad).toBe(2);
    expect(parseEnv('=1').bad).toBe(1);
  });
});

describe('checkNumber', () => {
  it.each([
    ['3', {}, null], [0, {}, null], ['-1', {}, 'validation.nonNegative'], ['', {}, 'validation.required'],
    ['1.5', {}, 'validation.integer'], ['x', {}, 'validation.notNumber'], ['1001', { max: 1000 }, 'validation.outOfRange'],
    ['0', { min: 0, minExclusive: true }, 'validation.positive'], ['0.4', { min: 0.5, integer: false }, 'validation.outOfRange'],
    ['-5', { min: -10 }, null],
  ])('%j %j -> %j', (v, o, want) => expect(checkNumber(v, o)).toBe(want));
});

describe('validateModelForm', () => {
  it('accepts a valid form', () => expect(validateModelForm(validForm())).toEqual({}));
  it('checks the name pattern when creating only', () => {
    for (const bad of ['Chat', 'chat_', '-chat', 'a b', '']) expect(validateModelForm({ ...validForm(), name: bad }).name).toBeTruthy();
    for (const ok of ['chat', 'qwen2.5-7b', 'a', 'a_b']) expect(validateModelForm({ ...validForm(), name: ok }).name).toBeUndefined();
    expect(validateModelForm({ ...validForm(), name: 'Bad' }, { creating: false })).toEqual({});
  });
  it('wants {port} in the command', () => {
    expect(validateModelForm({ ...validForm(), command: 'serve --port 8000' }).command).toBe('validation.portPlaceholder');
    expect(validateModelForm({ ...validForm(), command: '' }).command).toBe('validation.required');
  });
  it('refuses min > max at max_replicas, negative numbers, a bad env line and health path', () => {
    const e = validateModelForm({ ...validForm(), min_replicas: '3', max_replicas: '2', cpu_milli: -1, memory_mib: 'abc', env: 'oops', health_path: 'health' });
    expect(e).toEqual({
      max_replicas: 'validation.minMax', cpu_milli: 'validation.nonNegative', memory_mib: 'validation.notNumber',
      env: 'validation.env', health_path: 'validation.healthPath',
    });
  });
  it('checks GPU memory when shared, the GPU count when whole', () => {
    expect(validateModelForm({ ...validForm(), gpu_memory_mib: 0 }).gpu_memory_mib).toBe('validation.positive');
    expect(validateModelForm({ ...validForm(), gpu_mode: 'whole', gpu_memory_mib: 0, gpu: 2 })).toEqual({});
    expect(validateModelForm({ ...validForm(), gpu_mode: 'whole', gpu: -1 }).gpu).toBe('validation.nonNegative');
  });
  it('checks autoscaling fields only when enabled', () => {
    const f = { ...validForm(), autoscaling: { ...validForm().autoscaling, window_s: 0.1, target_inflight_per_replica: 0 } };
    expect(validateModelForm(f)).toEqual({});
    expect(validateModelForm({ ...f, autoscaling_enabled: true })).toEqual({
      'autoscaling.window_s': 'validation.outOfRange', 'autoscaling.target_inflight_per_replica': 'validation.positive',
    });
  });
});

describe('modelBody', () => {
  it('builds a create body for a shared GPU', () => {
    const f = { ...validForm(), gpu_memory_mib: '1024', gpu_models: ['T4'], env: 'A=1', cpu_milli: '500' };
    expect(modelBody(f)).toEqual({
      name: 'chat', model: 'chat', command: ['python3', 'serve.py', '--port', '{port}'], env: { A: '1' }, health_path: '/health',
      requests: { cpu_milli: 500, memory_mib: 2048, gpu_models: ['T4'], gpu_memory_mib: 1024 },
      priority: 0, preemptible: true, placement: 'spread', min_replicas: 1, max_replicas: 1, startup_timeout_s: 600,
    });
  });
  it('sends whole GPUs as a count and autoscaling when on', () => {
    const b = modelBody({ ...validForm(), gpu_mode: 'whole', gpu: '2', autoscaling_enabled: true, max_replicas: '4' });
    expect(b.requests).toEqual({ cpu_milli: 1000, memory_mib: 2048, gpu_models: [], gpu: 2 });
    expect(b.autoscaling).toEqual({ target_inflight_per_replica: 4, upscale_delay_s: 5, downscale_delay_s: 60, window_s: 10, queue_size: 100, cold_start_timeout_s: 120 });
    expect(b.max_replicas).toBe(4);
  });
  it('round-trips a model view into the same spec (a PUT without edits changes nothing)', () => {
    const b = modelBody(formFromModel(VIEW));
    const spec = { ...VIEW };
    for (const k of ['revision', 'status', 'replicas', 'endpoints', 'last_decision']) delete spec[k];
    // gpu and gpu_milli 1 are what the server fills in for gpu_memory_mib alone.
    expect(b).toEqual({ ...spec, requests: { gpu_memory_mib: 1024, gpu_models: ['T4'], cpu_milli: 500, memory_mib: 1024 } });
  });
  it('keeps an explicit compute share of a shared GPU', () => {
    const b = modelBody(formFromModel({ ...VIEW, requests: { ...VIEW.requests, gpu_milli: 250 } }));
    expect(b.requests.gpu_milli).toBe(250);
  });
  it('keeps the vendors an edited model asks for', () => {
    const b = modelBody(formFromModel({ ...VIEW, requests: { ...VIEW.requests, gpu_vendors: ['nvidia'] } }));
    expect(b.requests.gpu_vendors).toEqual(['nvidia']);
    expect(modelBody(formFromModel({ ...VIEW, requests: { ...VIEW.requests, gpu_vendors: [] } })).requests.gpu_vendors).toBeUndefined();
  });
  it('prefills a whole-GPU model and one without autoscaling', () => {
    const f = formFromModel({ ...VIEW, autoscaling: undefined, requests: { gpu: 2, gpu_milli: 2000, gpu_memory_mib: 0, gpu_models: [], cpu_milli: 1, memory_mib: 1 } });
    expect(f.gpu_mode).toBe('whole');
    expect(f.gpu).toBe(2);
    expect(f.autoscaling_enabled).toBe(false);
    expect(modelBody(f).autoscaling).toBeUndefined();
  });
});

describe('modelFieldFromApiMessage', () => {
  it.each([
    ['min_replicas (3) must be <= max_replicas (1)', 'min_replicas'],
    ['requests.gpu_memory_mib must be an integer >= 0', 'gpu_memory_mib'],
    ['requests.gpu must be an integer', 'gpu'],
    ['requests.gpu_models[0] must be a valid name', 'gpu_models'],
    ['command must contain the {port} placeholder', 'command'],
    ['autoscaling.window_s must be >= 0.5', 'autoscaling.window_s'],
    ['health_path must start with \'/\'', 'health_path'],
    ['name must be 1 to 253 characters', 'name'],
    ['model must be at most 512 characters', 'model'],
    ['unknown field "x"', null],
  ])('%s -> %s', (msg, want) => expect(modelFieldFromApiMessage(msg)).toBe(want));
});

describe('summaries and chart rows', () => {
  it('summarises autoscaling', () => {
    expect(autoscalingSummary(VIEW)).toEqual({ min: 1, max: 3, target: 2 });
    expect(autoscalingSummary({ ...VIEW, autoscaling: undefined })).toBe(null);
  });
  it('splits GPU memory into allocated, outside and free', () => {
    const rows = gpuMemoryRows([
      { node: 't4-1', index: 0, model: 'T4', memory_total_mib: 15360, memory_allocated_mib: 1024, memory_used_mib: 3000, memory_outside_mib: 1976, replicas: [{ task: 7, model: 'chat', memory_mib: 1024 }] },
      { node: 't4-1', index: 1, model: 'T4', memory_total_mib: 15360, memory_allocated_mib: 15360, memory_used_mib: null, memory_outside_mib: null },
    ]);
    expect(rows[0]).toMatchObject({ label: 't4-1/0', allocated: 1024, outside: 1976, free: 12360, used: 3000 });
    expect(rows[0].replicas).toHaveLength(1);
    expect(rows[1]).toMatchObject({ allocated: 15360, outside: 0, free: 0, used: null });
  });
  it('gives each GPU a row of height', () => {
    expect(gpuChartHeight(1)).toBe(180);
    expect(gpuChartHeight(24)).toBe(80 + 24 * 26);
  });
  it('writes a curl example with the key', () => {
    const c = curlExample('http://h:1', 'chat', 'hfk_x');
    expect(c).toContain('curl http://h:1/inference/v1/chat/completions');
    expect(c).toContain('-H "Authorization: Bearer hfk_x"');
    expect(c).toContain(`-d '{"model":"chat","messages":[{"role":"user","content":"Hello"}]}'`);
    expect(curlExample('http://h:1', 'pub', null)).not.toContain('Authorization');
  });
});
