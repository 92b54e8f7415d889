// Aggregations of the node and GPU lists for the overview and the nodes page.
import { ratio } from './format.js';

export const CONDITIONS = ['Ready', 'NotReady', 'Draining'];

export function countByCondition(nodes) {
  const counts = { Ready: 0, NotReady: 0, Draining: 0 };
  for (const n of nodes || []) counts[n.condition] = (counts[n.condition] || 0) + 1;
  return counts;
}

// Per GPU model: how many GPUs, the share allocated (milli-GPUs), the memory
// allocated and, where agents measured it, the memory used and the mean
// utilisation. `gpus` is the inference panel's list (one entry per GPU).
export function gpusByModel(gpus) {
  const by = new Map();
  for (const g of gpus || []) {
    const model = g.model || 'unknown';
    if (!by.has(model)) {
      by.set(model, {
        model, count: 0, allocated_milli: 0, memory_total_mib: 0, memory_allocated_mib: 0,
        memory_used_mib: 0, measured: 0, util_sum: 0, util_n: 0,
      });
    }
    const m = by.get(model);
    m.count++;
    m.allocated_milli += Number(g.allocated_milli) || 0;
    m.memory_total_mib += Number(g.memory_total_mib) || 0;
    // The server counts a whole GPU's memory for a task holding it whole.
    m.memory_allocated_mib += Number(g.memory_allocated_mib) || 0;
    if (typeof g.memory_used_mib === 'number') {
      m.memory_used_mib += g.memory_used_mib;
      m.measured++;
    }
    if (typeof g.utilization === 'number') {
      m.util_sum += g.utilization;
      m.util_n++;
    }
  }
  return [...by.values()]
    .map((m) => ({
      model: m.model,
      count: m.count,
      allocated: ratio(m.allocated_milli, m.count * 1000),
      memory_total_mib: m.memory_total_mib,
      memory_allocated_mib: m.memory_allocated_mib,
      memory_used_mib: m.measured ? m.memory_used_mib : null,
      memory_allocated: ratio(m.memory_allocated_mib, m.memory_total_mib),
      memory_used: m.measured ? ratio(m.memory_used_mib, m.memory_total_mib) : null,
      utilization: m.util_n ? m.util_sum / m.util_n : null,
    }))
    .sort((a, b) => (a.model < b.model ? -1 : a.model > b.model ? 1 : 0));
}

// The GPUs of the node list in the inference panel's shape, for
// gpusByModel: a node's GPUs carry the allocation (allocated_milli,
// allocated_memory_mib) and what the agent measured (utilization,
// memory_used_mib: null until measured).
export function nodeGpus(nodes) {
  const out = [];
  for (const n of nodes || []) {
    (n.gpus || []).forEach((g, i) => out.push({
      node: n.name,
      index: g.index ?? i,
      model: g.model,
      memory_total_mib: g.memory_mib,
      allocated_milli: g.allocated_milli || 0,
      memory_allocated_mib: g.allocated_memory_mib || 0,
      memory_used_mib: typeof g.memory_used_mib === 'number' ? g.memory_used_mib : null,
      utilization: typeof g.utilization === 'number' ? g.utilization : null,
    }));
  }
  return out;
}

// Measured usage of one node's GPUs: the mean utilisation and the memory
// used, over the GPUs its agent measured; null when none was measured.
export function measuredGpus(node) {
  let util = 0;
  let utilN = 0;
  let used = 0;
  let usedN = 0;
  for (const g of (node && node.gpus) || []) {
    if (typeof g.utilization === 'number') { util += g.utilization; utilN++; }
    if (typeof g.memory_used_mib === 'number') { used += g.memory_used_mib; usedN++; }
  }
  if (!utilN && !usedN) return null;
  return { utilization: utilN ? util / utilN : null, memory_used_mib: usedN ? used : null };
}

// Joins node GPUs (allocation) with the inference panel's GPUs (which carry
// the allocated share per GPU only through the node list). Returns panel GPUs
// with allocated_milli filled in from the nodes.
export function withAllocatedMilli(panelGpus, nodes) {
  const alloc = new Map();
  for (const n of nodes || []) {
    (n.gpus || []).forEach((g, i) => alloc.set(`${n.name}/${g.index ?? i}`, g.allocated_milli || 0));
  }
  return (panelGpus || []).map((g) => ({ ...g, allocated_milli: g.allocated_milli ?? alloc.get(`${g.node}/${g.index}`) ?? 0 }));
}

// A one-line description of a stream event for the recent-events list.
export function describeEvent(type, data) {
  if (!data || typeof data !== 'object') return type;
  const parts = [];
  if (data.action) parts.push(data.action);
  if (type === 'task') {
    if (data.name) parts.push(data.id !== undefined ? `${data.name} (#${data.id})` : data.name);
    else if (data.id !== undefined) parts.push(`#${data.id}`);
    if (data.node) parts.push(`→ ${data.node}`);
  } else if (data.name) {
    parts.push(data.name);
  } else if (data.node) {
    parts.push(data.node);
  }
  if (data.by) parts.push(`(${data.by})`);
  return parts.join(' ');
}

// A task's request in one line: "2× GPU · NVIDIA · A100-80G · 8 CPU · 64 GiB
// · RDMA", the vendors it asks (gpu_vendors) named by `vendorName`, the
// models it asks (gpu_models) as given; alternatives joined by "|".
export function requestSummary(task, fmtMiB = (v) => `${v} MiB`, vendorName = (v) => v) {
  const r = (task && task.requests) || {};
  const parts = [];
  if (r.gpu) parts.push(`${r.gpu}× GPU${r.gpu_milli && r.gpu_milli < 1000 ? ` (${r.gpu_milli}m)` : ''}`);
  if (r.gpu_vendors && r.gpu_vendors.length) parts.push(r.gpu_vendors.map(vendorName).join('|'));
  if (r.gpu_models && r.gpu_models.length) parts.push(r.gpu_models.join('|'));
  if (r.gpu_memory_mib) parts.push(`${fmtMiB(r.gpu_memory_mib)} GPU mem`);
  if (r.cpu_milli) parts.push(`${r.cpu_milli / 1000} CPU`);
  if (r.memory_mib) parts.push(fmtMiB(r.memory_mib));
  if (task && task.rdma_required) parts.push('RDMA');
  return parts.join(' · ') || '—';
}

// Why a task is not running yet, or '' when nothing holds it: a pending task's
// reason for not being placed, or a scheduled task's reason for not being
// started ("waiting for task 12 to exit", while a preempted task's process
// still holds its GPUs).
export function waitReason(task) {
  if (!task || (task.state !== 'pending' && task.state !== 'scheduled')) return '';
  return task.pending_reason || '';
}
