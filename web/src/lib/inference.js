// Pure logic of the inference panel: the deploy / edit form (defaults, the
// form from a model view, checks that mirror src/server/inference_spec.cc,
// the request body), status colours, summaries, the GPU memory chart's
// numbers and the curl example shown with a new endpoint key. Form checks
// return {field: i18n key} like validate.js; numbers typed into the form may
// be strings.

// The server's naming rule (src/core/json_fields.cc CheckName): a-z, 0-9,
// '.', '_' or '-', starting and ending with a letter or digit; model
// deployments at most 200 characters.
export const NAME_RE = /^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$/;
export const MAX_MODEL_NAME = 200;
export const MAX_REPLICAS = 1000;

export const AUTOSCALING_DEFAULTS = {
  target_inflight_per_replica: 4,
  upscale_delay_s: 5,
  downscale_delay_s: 60,
  window_s: 10,
  queue_size: 100,
  cold_start_timeout_s: 120,
};

// Each autoscaling field: [min, max, min exclusive, integer] as the server reads it.
export const AUTOSCALING_LIMITS = {
  target_inflight_per_replica: [0, 1e6, true, false],
  upscale_delay_s: [0, 86400, false, false],
  downscale_delay_s: [0, 86400, false, false],
  window_s: [0.5, 3600, false, false],
  queue_size: [0, 100000, false, true],
  cold_start_timeout_s: [0, 3600, true, false],
};

export const STATUS_TAG = {
  running: 'success',
  deploying: 'primary',
  scaling: 'primary',
  degraded: 'warning',
  failed: 'danger',
  stopped: 'info',
};

// The el-tag type of a model status.
export function statusTagType(status) {
  return STATUS_TAG[status] || 'info';
}

export function emptyModelForm() {
  return {
    name: '',
    model: '',
    command: '',
    env: '',
    health_path: '/health',
    gpu_mode: 'shared', // 'shared': GPU memory on one shared GPU; 'whole': whole GPUs
    gpu_memory_mib: 1024,
    gpu: 1,
    gpu_milli: 0, // kept from an edited model's explicit compute share; not shown
    gpu_models: [],
    gpu_vendors: [], // kept from an edited model's requests; not shown
    cpu_milli: 1000,
    memory_mib: 2048,
    priority: 0,
    preemptible: true,
    placement: 'spread', // replicas on different nodes (or 'pack': together)
    min_replicas: 1,
    max_replicas: 1,
    startup_timeout_s: 600,
    autoscaling_enabled: false,
    autoscaling: { ...AUTOSCALING_DEFAULTS },
  };
}

// The command as the form shows it: one argument per line.
export function commandToText(argv) {
  return (argv || []).join('\n');
}

// One argument per line; blank lines are dropped, each line trimmed.
export function parseCommand(text) {
  return String(text || '')
    .split(/\r?\n/)
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

export function envToText(env) {
  return Object.entries(env || {}).map(([k, v]) => `${k}=${v}`).join('\n');
}

// KEY=VALUE lines (blank lines and lines starting with # skipped). Returns
// {env, bad} where bad is the 1-based number of the first malformed line, or 0.
export function parseEnv(text) {
  const env = {};
  const lines = String(text || '').split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i].trim();
    if (!line || line.startsWith('#')) continue;
    const eq = line.indexOf('=');
    const key = eq < 0 ? '' : line.slice(0, eq).trim();
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(key)) return { env, bad: i + 1 };
    env[key] = line.slice(eq + 1);
  }
  return { env, bad: 0 };
}

// A form prefilled from a model view (GET /inference/models/{name}).
export function formFromModel(m) {
  const f = emptyModelForm();
  const r = m.requests || {};
  f.name = m.name || '';
  f.model = m.model || '';
  f.command = commandToText(m.command);
  f.env = envToText(m.env);
  f.health_path = m.health_path || '/health';
  f.gpu_mode = (r.gpu_memory_mib || 0) > 0 ? 'shared' : 'whole';
  f.gpu_memory_mib = r.gpu_memory_mib || 0;
  f.gpu = r.gpu ?? 0;
  f.gpu_milli = r.gpu_milli || 0;
  f.gpu_models = [...(r.gpu_models || [])];
  f.gpu_vendors = [...(r.gpu_vendors || [])];
  f.cpu_milli = r.cpu_milli ?? 0;
  f.memory_mib = r.memory_mib ?? 0;
  f.priority = m.priority ?? 0;
  f.preemptible = m.preemptible ?? true;
  f.placement = m.placement === 'pack' ? 'pack' : 'spread';
  f.min_replicas = m.min_replicas ?? 1;
  f.max_replicas = m.max_replicas ?? 1;
  f.startup_timeout_s = m.startup_timeout_s ?? 600;
  f.autoscaling_enabled = !!m.autoscaling;
  f.autoscaling = { ...AUTOSCALING_DEFAULTS, ...(m.autoscaling || {}) };
  return f;
}

function num(v) {
  if (typeof v === 'number') return v;
  if (typeof v !== 'string') return NaN;
  const s = v.trim();
  if (!/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(s)) return NaN;
  return Number(s);
}

function blank(v) {
  return v === null || v === undefined || (typeof v === 'string' && v.trim() === '');
}

// null, or the i18n key of what is wrong with a number field.
export function checkNumber(v, { min = 0, max = Infinity, minExclusive = false, integer = true } = {}) {
  if (blank(v)) return 'validation.required';
  const n = num(v);
  if (!Number.isFinite(n)) return 'validation.notNumber';
  if (integer && !Number.isInteger(n)) return 'validation.integer';
  if (n < 0 && min >= 0) return 'validation.nonNegative';
  if (minExclusive ? n <= min : n < min) return minExclusive && min === 0 ? 'validation.positive' : 'validation.outOfRange';
  if (n > max) return 'validation.outOfRange';
  return null;
}

// Checks the whole form; `creating` checks the name too. Returns {field: key}.
// Field names: name, model, command, env, health_path, gpu_memory_mib, gpu,
// cpu_milli, memory_mib, priority, min_replicas, max_replicas,
// startup_timeout_s, autoscaling.<key>.
export function validateModelForm(f, { creating = true } = {}) {
  const e = {};
  if (creating) {
    const name = String(f.name || '').trim();
    if (!name) e.name = 'validation.required';
    else if (name.length > MAX_MODEL_NAME || !NAME_RE.test(name)) e.name = 'validation.name';
  }
  if (String(f.model || '').length > 512) e.model = 'validation.tooLong';
  const argv = parseCommand(f.command);
  if (!argv.length) e.command = 'validation.required';
  else if (!argv.some((a) => a.includes('{port}'))) e.command = 'validation.portPlaceholder';
  if (parseEnv(f.env).bad) e.env = 'validation.env';
  const hp = String(f.health_path || '');
  if (!hp.startsWith('/') || /[^\x21-\x7e]/.test(hp)) e.health_path = 'validation.healthPath';
  const put = (field, err) => {
    if (err) e[field] = err;
  };
  if (f.gpu_mode === 'shared') put('gpu_memory_mib', checkNumber(f.gpu_memory_mib, { min: 0, minExclusive: true }));
  else put('gpu', checkNumber(f.gpu, { min: 0 }));
  put('cpu_milli', checkNumber(f.cpu_milli));
  put('memory_mib', checkNumber(f.memory_mib));
  put('priority', checkNumber(f.priority, { min: -1000000, max: 1000000 }));
  put('min_replicas', checkNumber(f.min_replicas, { max: MAX_REPLICAS }));
  put('max_replicas', checkNumber(f.max_replicas, { max: MAX_REPLICAS }));
  if (!e.min_replicas && !e.max_replicas && num(f.min_replicas) > num(f.max_replicas)) e.max_replicas = 'validation.minMax';
  put('startup_timeout_s', checkNumber(f.startup_timeout_s, { min: 0, max: 86400, minExclusive: true, integer: false }));
  if (f.autoscaling_enabled) {
    for (const [k, [min, max, minExclusive, integer]] of Object.entries(AUTOSCALING_LIMITS)) {
      put(`autoscaling.${k}`, checkNumber((f.autoscaling || {})[k], { min, max, minExclusive, integer }));
    }
  }
  return e;
}

// The body of POST /inference/models (with the name) or PUT
// /inference/models/{name} (the whole spec: the PUT replaces it). Shared GPU:
// gpu_memory_mib without a GPU count (the server makes it one shared GPU,
// memory-only unless a compute share was given). Whole GPUs: the count.
export function modelBody(f) {
  const requests = {
    cpu_milli: num(f.cpu_milli),
    memory_mib: num(f.memory_mib),
    gpu_models: [...(f.gpu_models || [])].map((s) => String(s).trim()).filter(Boolean),
  };
  if ((f.gpu_vendors || []).length) requests.gpu_vendors = [...f.gpu_vendors];
  if (f.gpu_mode === 'shared') {
    requests.gpu_memory_mib = num(f.gpu_memory_mib);
    if (num(f.gpu_milli) > 1) requests.gpu_milli = num(f.gpu_milli);
  } else {
    requests.gpu = num(f.gpu);
  }
  const body = {
    name: String(f.name || '').trim(),
    model: String(f.model || '').trim() || String(f.name || '').trim(),
    command: parseCommand(f.command),
    env: parseEnv(f.env).env,
    health_path: String(f.health_path || '/health'),
    requests,
    priority: num(f.priority),
    preemptible: !!f.preemptible,
    placement: f.placement === 'pack' ? 'pack' : 'spread',
    min_replicas: num(f.min_replicas),
    max_replicas: num(f.max_replicas),
    startup_timeout_s: num(f.startup_timeout_s),
  };
  if (f.autoscaling_enabled) {
    body.autoscaling = {};
    for (const k of Object.keys(AUTOSCALING_DEFAULTS)) body.autoscaling[k] = num(f.autoscaling[k]);
  }
  return body;
}

const API_FIELDS = [
  ['autoscaling.', null],
  ['requests.gpu_memory_mib', 'gpu_memory_mib'],
  ['requests.gpu_models', 'gpu_models'],
  ['requests.gpu_milli', 'gpu_memory_mib'],
  ['requests.gpu', 'gpu'],
  ['requests.cpu_milli', 'cpu_milli'],
  ['requests.memory_mib', 'memory_mib'],
  ['min_replicas', 'min_replicas'],
  ['max_replicas', 'max_replicas'],
  ['health_path', 'health_path'],
  ['startup_timeout_s', 'startup_timeout_s'],
  ['priority', 'priority'],
  ['command', 'command'],
  ['env', 'env'],
  ['name', 'name'],
  ['model', 'model'],
];

// The form field an API 400 message names ("min_replicas (3) must be <=
// max_replicas (1)" -> min_replicas; "requests.gpu_memory_mib must be ..."
// -> gpu_memory_mib), or null.
export function modelFieldFromApiMessage(message) {
  const m = String(message || '');
  const a = m.match(/^autoscaling\.([a-z_]+)/);
  if (a) return `autoscaling.${a[1]}`;
  for (const [prefix, field] of API_FIELDS) {
    if (!field) continue;
    if (m.startsWith(prefix) && !/^[a-z_]/.test(m.slice(prefix.length))) return field;
  }
  return null;
}

// "2–6 · 4 / replica" for a model with autoscaling; null without.
export function autoscalingSummary(m) {
  if (!m || !m.autoscaling) return null;
  return { min: m.min_replicas, max: m.max_replicas, target: m.autoscaling.target_inflight_per_replica };
}

// The numbers of the GPU memory chart, per GPU, in MiB: allocated (by
// HeteroFlow), outside (used beyond allocated, by processes outside
// HeteroFlow; 0 when unmeasured), free (what is left of the total), used
// (measured, null when unmeasured), and the replicas with their model names.
export function gpuMemoryRows(gpus) {
  return (gpus || []).map((g) => {
    const total = g.memory_total_mib || 0;
    const allocated = g.memory_allocated_mib || 0;
    const outside = typeof g.memory_outside_mib === 'number' ? Math.max(0, g.memory_outside_mib) : 0;
    return {
      label: `${g.node}/${g.index}`,
      node: g.node,
      index: g.index,
      model: g.model || '',
      total,
      allocated,
      outside,
      free: Math.max(0, total - allocated - outside),
      used: typeof g.memory_used_mib === 'number' ? g.memory_used_mib : null,
      replicas: g.replicas || [],
      tasks: g.tasks || [],
      utilization: typeof g.utilization === 'number' ? g.utilization : null,
    };
  });
}

// The chart's height in px: one readable row per GPU (horizontal bars), plus
// 80 px for the legend above and the tick labels and unit below.
export function gpuChartHeight(n) {
  return Math.max(180, 80 + n * 26);
}

// The curl example shown with a new key.
export function curlExample(origin, endpoint, secret) {
  const body = JSON.stringify({ model: endpoint, messages: [{ role: 'user', content: 'Hello' }] });
  const auth = secret ? ` \\\n  -H "Authorization: Bearer ${secret}"` : '';
  return `curl ${origin}/inference/v1/chat/completions${auth} \\\n  -H "Content-Type: application/json" \\\n  -d '${body}'`;
}
