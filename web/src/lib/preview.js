// The logic of the live preview: what the candidate policy changes, the
// request body for POST /api/v1/scheduler/preview, the order in which
// "apply" saves the changes, and which tasks move.

const FIELDS = ['enabled', 'weight', 'mode'];

// The editable candidate, prefilled from GET /api/v1/plugins:
// {name: {enabled, weight?, mode?}}. A plugin that only filters has no
// weight (the API says null), so its candidate has none to edit.
export function candidateFromPlugins(plugins) {
  const c = {};
  for (const p of plugins || []) {
    c[p.name] = { enabled: !!p.enabled };
    if (hasWeight(p)) c[p.name].weight = p.weight;
    if (p.mode !== undefined) c[p.name].mode = p.mode;
  }
  return c;
}

// Whether a plugin has a weight: filters do not (GET /plugins gives null).
export function hasWeight(p) {
  return p && p.weight !== null && p.weight !== undefined;
}

function sameValue(a, b) {
  if (typeof a === 'number' || typeof b === 'number') return Number(a) === Number(b);
  return a === b;
}

// The differences between the current plugins and the candidate:
// {name: {field: newValue}} with only the fields that changed.
export function policyDiff(plugins, candidate) {
  const diff = {};
  const byName = Object.fromEntries((plugins || []).map((p) => [p.name, p]));
  for (const [name, cand] of Object.entries(candidate || {})) {
    const cur = byName[name];
    if (!cur) continue;
    const d = {};
    for (const f of FIELDS) {
      if (cand[f] === undefined) continue;
      if (f === 'enabled' && cur.required) continue;
      let v = cand[f];
      if (f === 'weight') v = Number(v);
      if (!sameValue(cur[f], v)) d[f] = v;
    }
    if (Object.keys(d).length) diff[name] = d;
  }
  return diff;
}

// The workloads the server can preview (docs/API.md, Scheduler preview):
// "cluster" re-places every task, placed and pending, on an empty copy of the
// cluster under both policies (the whole-cluster what-if); "pending" places
// the pending queue on the cluster as it is. Pending tasks are pending because
// they fit nowhere, so "pending" rarely moves anything: "cluster" is the
// default.
export const WORKLOADS = ['cluster', 'pending'];
export const DEFAULT_WORKLOAD = 'cluster';

// The preview request for a diff and a workload (explain on: per-node
// breakdowns). An unknown workload falls back to the default.
export function previewBody(diff, workload = DEFAULT_WORKLOAD) {
  const body = { explain: true, workload: WORKLOADS.includes(workload) ? workload : DEFAULT_WORKLOAD };
  if (diff && Object.keys(diff).length) body.plugins = diff;
  return body;
}

// The PUTs that save a diff, in an order the server accepts: plugins being
// disabled first (so binpack off + spread on never meets the 409 for both
// enabled), then changes that keep the state, then plugins being enabled.
export function applySteps(diff) {
  const disable = [];
  const keep = [];
  const enable = [];
  for (const [name, patch] of Object.entries(diff || {})) {
    if (patch.enabled === false) disable.push([name, patch]);
    else if (patch.enabled === true) enable.push([name, patch]);
    else keep.push([name, patch]);
  }
  const byName = (a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0);
  return [...disable.sort(byName), ...keep.sort(byName), ...enable.sort(byName)];
}

// One allocated GPU as text: docs/API.md shows plain indexes ([0, 1]); the
// server sends {index, milli, memory_mib}. A share below a whole GPU is
// shown in milli-GPUs: "1(500m)".
export function gpuLabel(g) {
  if (g && typeof g === 'object') {
    const share = typeof g.milli === 'number' && g.milli < 1000 ? `(${g.milli}m)` : '';
    return `${g.index ?? '?'}${share}`;
  }
  return String(g);
}

export function gpusText(side) {
  if (!side || !Array.isArray(side.gpus)) return '';
  return side.gpus.map(gpuLabel).join(',');
}

// A task is moved when the two policies place it on different nodes (or on
// different GPUs of the same node), or place it under one policy only.
export function isMoved(task) {
  // The server says so per task ("moved": bool); older answers do not.
  if (task && typeof task.moved === 'boolean') return task.moved;
  const a = (task && task.current) || {};
  const b = (task && task.candidate) || {};
  const na = a.node ?? null;
  const nb = b.node ?? null;
  if (na !== nb) return true;
  return na !== null && gpusText(a) !== gpusText(b);
}

export function movedTasks(tasks) {
  return (tasks || []).filter(isMoved);
}

// The headline figures of a preview answer. `moved` is the server's count
// when it gives one, else counted here.
export function summarize(answer) {
  if (!answer) return null;
  const tasks = answer.tasks || [];
  const cur = answer.current || {};
  const cand = answer.candidate || {};
  return {
    moved: typeof answer.moved === 'number' ? answer.moved : movedTasks(tasks).length,
    tasks: tasks.length,
    current: cur,
    candidate: cand,
  };
}

// Rows of a task's per-node table: one per node, with each side's verdict
// and, per plugin, the raw and weighted score. `plugins` is the sorted
// union of the plugins that scored on either side.
export function nodeBreakdown(task) {
  const rows = [];
  const plugins = new Set();
  for (const n of (task && task.nodes) || []) {
    const row = { node: n.node, current: n.current || null, candidate: n.candidate || null };
    for (const side of [row.current, row.candidate]) {
      if (side && side.scores) for (const p of Object.keys(side.scores)) plugins.add(p);
    }
    rows.push(row);
  }
  return { rows, plugins: [...plugins].sort() };
}

// The total score of one side of a node row: the sum of weighted scores.
export function totalScore(side) {
  if (!side || !side.scores || side.feasible === false) return null;
  let t = 0;
  for (const s of Object.values(side.scores)) t += Number(s.weighted) || 0;
  return t;
}

// Plugins in a fixed, meaningful order: the vision's five, the core filters,
// then anything else by name.
const ORDER = ['binpack', 'spread', 'fragment', 'preempt', 'rdma', 'topology', 'fit', 'load_threshold'];
export function sortPlugins(plugins) {
  const rank = (n) => (ORDER.includes(n) ? ORDER.indexOf(n) : ORDER.length);
  return [...(plugins || [])].sort((a, b) => rank(a.name) - rank(b.name) || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

// extension_points comes as "Filter,Score" (a string) or as an array.
export function extensionPoints(p) {
  const e = p && p.extension_points;
  if (Array.isArray(e)) return e;
  if (typeof e === 'string' && e) return e.split(',').map((s) => s.trim()).filter(Boolean);
  return [];
}

// The other plugin a 409 names ("binpack" when enabling spread), and the two
// names in a stable order for the explanation.
export function conflictPair(self, message, names) {
  const m = String(message || '');
  const other = (names || []).find((n) => n !== self && new RegExp(`\\b${n}\\b`).test(m));
  if (!other) return null;
  return [self, other].sort();
}
