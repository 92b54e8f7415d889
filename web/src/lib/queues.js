// The queues page's arithmetic (GET /api/v1/queues): the tree order with
// each queue's depth, and one bar per GPU model of the cluster: what the
// queue uses against its guarantee and its max (or the cluster's capacity
// when it has no max). Quotas name GPUs by model, "*" for every model they
// do not name; a model a guarantee does not name is 0, one a max does not
// name has no limit (docs/API.md).

export const EVERY_OTHER_MODEL = '*';

function num(v) {
  const n = Number(v);
  return Number.isFinite(n) ? n : null;
}

// The amount a quota ({gpu: {MODEL|"*": n}, ...}) gives GPUs of `model`: its
// own entry, else "*", else null (none named).
export function gpuQuota(quota, model) {
  const g = quota && quota.gpu;
  if (!g || typeof g !== 'object') return null;
  if (Object.prototype.hasOwnProperty.call(g, model)) return num(g[model]);
  if (Object.prototype.hasOwnProperty.call(g, EVERY_OTHER_MODEL)) return num(g[EVERY_OTHER_MODEL]);
  return null;
}

// The GPU models of the cluster, sorted by name.
export function clusterModels(capacity) {
  const g = (capacity && capacity.gpu) || {};
  return Object.keys(g).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

const clamp01 = (x) => (x < 0 ? 0 : x > 1 ? 1 : x);

// One bar of `queue` for GPU `model`, against the cluster `capacity`:
//   used, guaranteed (0 when none), max (null when no limit), capacity,
//   end: where the bar ends (max, else the capacity),
//   borrowed: what the server counts as borrowed for this model (the
//     queue's `borrowed`; when the API gives none, used beyond guaranteed),
//   usedFrac, guaranteedFrac (null when nothing is guaranteed),
//   withinFrac: the part of the fill not borrowed (used - borrowed), the
//     rest of the fill (usedFrac - withinFrac) is borrowed,
//   fractions of `scale`: the end, widened to fit a guarantee or use larger
//   than it (a guarantee above the cluster's capacity is not refused).
export function gpuBar(queue, model, capacity) {
  const used = num(queue && queue.usage && queue.usage.gpu && queue.usage.gpu[model]) || 0;
  const guaranteed = gpuQuota(queue && queue.guaranteed, model) || 0;
  const max = gpuQuota(queue && queue.max, model);
  const cap = num(capacity && capacity.gpu && capacity.gpu[model]) || 0;
  const end = max !== null ? max : cap;
  let borrowed;
  if (queue && queue.borrowed && typeof queue.borrowed === 'object') {
    borrowed = num(queue.borrowed.gpu && queue.borrowed.gpu[model]) || 0;
  } else {
    borrowed = Math.max(0, used - guaranteed);
  }
  const scale = Math.max(end, used, guaranteed);
  const frac = (v) => (scale > 0 ? clamp01(v / scale) : 0);
  return {
    model,
    used,
    guaranteed,
    max,
    capacity: cap,
    end,
    borrowed,
    usedFrac: frac(used),
    withinFrac: frac(Math.max(0, used - borrowed)),
    guaranteedFrac: guaranteed > 0 ? frac(guaranteed) : null,
    endFrac: frac(end),
  };
}

// The bars of `queue`, one per GPU model of the cluster.
export function queueBars(queue, capacity) {
  return clusterModels(capacity).map((m) => gpuBar(queue, m, capacity));
}

// GPUs borrowed by `queue` over every model (its `borrowed.gpu`).
export function borrowedGpus(queue) {
  const g = (queue && queue.borrowed && queue.borrowed.gpu) || {};
  let sum = 0;
  for (const v of Object.values(g)) sum += num(v) || 0;
  return sum;
}

// The queues in tree order: each parent followed by its children (in the
// order the API gives them, which is the tree's), each with its depth (root
// 0). A queue whose parent is missing is placed at the top; a cycle is
// broken rather than followed. Returns [{queue, depth, hasChildren}].
export function treeOrder(queues) {
  const list = (queues || []).filter((q) => q && typeof q.name === 'string');
  const names = new Set(list.map((q) => q.name));
  const children = new Map();
  const tops = [];
  for (const q of list) {
    const p = q.parent;
    if (p === null || p === undefined || p === '' || !names.has(p) || p === q.name) {
      tops.push(q);
    } else {
      if (!children.has(p)) children.set(p, []);
      children.get(p).push(q);
    }
  }
  const out = [];
  const seen = new Set();
  const visit = (q, depth) => {
    if (seen.has(q.name)) return;
    seen.add(q.name);
    const kids = children.get(q.name) || [];
    out.push({ queue: q, depth, hasChildren: kids.length > 0 });
    for (const c of kids) visit(c, depth + 1);
  };
  for (const q of tops) visit(q, 0);
  // Queues only reachable through a cycle: listed at the top, once.
  for (const q of list) if (!seen.has(q.name)) visit(q, 0);
  return out;
}

// A GPU count for display: whole numbers as they are, fractions to two
// decimals ("0.5", "2.25"); missing -> "—".
export function formatGpus(v) {
  const n = num(v);
  if (n === null) return '—';
  return Number(n.toFixed(2)).toString();
}

// The i18n key and parameters describing a queue event
// ({action, queue, by_queue?, task?, task_name?, for_task?, for_task_name?, by?}).
export function queueEventMessage(e) {
  const d = e || {};
  const task = (id, name) => (name ? `${name} (#${id})` : id !== undefined && id !== null ? `#${id}` : '—');
  if (d.action === 'reclaimed') {
    return {
      key: 'queues.event.reclaimed',
      params: {
        task: task(d.task, d.task_name),
        queue: d.queue || '—',
        byQueue: d.by_queue || '—',
        forTask: task(d.for_task, d.for_task_name),
      },
    };
  }
  if (['created', 'changed', 'deleted'].includes(d.action)) {
    return { key: d.by ? `queues.event.${d.action}By` : `queues.event.${d.action}`, params: { queue: d.queue || '—', by: d.by || '' } };
  }
  return { key: 'queues.event.other', params: { action: d.action || '?', queue: d.queue || '—' } };
}

// The newest `n` events first (the API lists them oldest first).
export function recentEvents(events, n = 20) {
  return [...(events || [])]
    .map((e, i) => ({ e, i }))
    .sort((a, b) => (Number(b.e.time_ms) || 0) - (Number(a.e.time_ms) || 0) || b.i - a.i)
    .slice(0, n)
    .map((x) => x.e);
}

// Backfill's reservation of a waiting task ({start, nodes: [{node, members}]}),
// as the i18n key and its parameters; null when it holds none.
export function reservationMessage(r) {
  if (!r || typeof r !== 'object' || !Array.isArray(r.nodes)) return null;
  const nodes = r.nodes.map((n) => `${n.node} (${n.members})`).join(', ');
  return { key: 'queues.reservation', params: { start: r.start || '—', nodes: nodes || '—' } };
}
