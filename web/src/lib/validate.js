// Client-side checks of the scheduler config form. They mirror the server
// (src/server/codec.cc, src/framework/policy.cc): thresholds are numbers in
// (0, 1]; weights are finite numbers >= 0. Each check returns null when the
// value is fine, or the vue-i18n key of the message to show at the field.

export const THRESHOLDS = ['load_threshold', 'gpu_load_threshold', 'memory_threshold'];

function toNumber(value) {
  if (typeof value === 'number') return value;
  if (typeof value !== 'string') return NaN;
  const s = value.trim();
  if (s === '') return NaN;
  // Number('') is 0 and Number('0x10') is 16: accept plain decimals only.
  if (!/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(s)) return NaN;
  return Number(s);
}

export function isBlank(value) {
  return value === null || value === undefined || (typeof value === 'string' && value.trim() === '');
}

export function validateThreshold(value) {
  if (isBlank(value)) return 'validation.required';
  const n = toNumber(value);
  if (!Number.isFinite(n)) return 'validation.notNumber';
  if (n <= 0 || n > 1) return 'validation.thresholdRange';
  return null;
}

export function validateWeight(value) {
  if (isBlank(value)) return 'validation.required';
  const n = toNumber(value);
  if (!Number.isFinite(n)) return 'validation.notNumber';
  if (n < 0) return 'validation.weightRange';
  return null;
}

// Validates the whole form {load_threshold, ..., weights: {plugin: value}}.
// Returns {field: key}; weight fields are named "weight-<plugin>".
export function validateConfig(form) {
  const errors = {};
  for (const f of THRESHOLDS) {
    const e = validateThreshold(form[f]);
    if (e) errors[f] = e;
  }
  for (const [plugin, v] of Object.entries(form.weights || {})) {
    const e = validateWeight(v);
    if (e) errors[`weight-${plugin}`] = e;
  }
  return errors;
}

// The body for PUT /api/v1/scheduler/config: only what differs from `saved`.
export function configPatch(form, saved) {
  const patch = {};
  for (const f of THRESHOLDS) {
    const n = toNumber(form[f]);
    if (!saved || n !== saved[f]) patch[f] = n;
  }
  const weights = {};
  for (const [plugin, v] of Object.entries(form.weights || {})) {
    const n = toNumber(v);
    if (!saved || !saved.score_weights || n !== saved.score_weights[plugin]) weights[plugin] = n;
  }
  if (Object.keys(weights).length) patch.score_weights = weights;
  return patch;
}

// The form field an API 400 message names, or null. The server names the
// field at the start of the message ("load_threshold must be a number in
// (0, 1]", "score_weights.binpack must be a finite number >= 0",
// 'unknown field "x"').
export function fieldFromApiMessage(message) {
  const m = String(message || '');
  const w = m.match(/score_weights\.([A-Za-z0-9_-]+)/);
  if (w) return `weight-${w[1]}`;
  for (const f of THRESHOLDS) {
    if (new RegExp(`(^|[^A-Za-z_])${f}([^A-Za-z_]|$)`).test(m)) return f;
  }
  return null;
}
