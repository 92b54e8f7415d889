// The cluster the browser checks look at: the demo of ./scripts/run.sh
// (examples/demo) on real agents — two 8-GPU A100 nodes with RDMA, a 4-GPU T4
// node, a 4-NPU Ascend node, a CPU-only node — running the demo's tasks, one of which preempts a
// sweep trial, plus tasks that stay pending with a reason (the live preview
// runs the pending queue).
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { API, startAgents, waitUntil } from './harness.mjs';

const DEMO_NODES = ['a100-1', 'a100-2', 't4-1', 'ascend-1', 'cpu-1'];

// Pending for good: a GPU model the cluster lacks, and more GPUs than any node has.
const EXTRA_PENDING = [
  { name: 'want-h100', priority: 3, requests: { gpu: 1, gpu_models: ['H100'], cpu_milli: 1000, memory_mib: 4096 }, command: ['true'] },
  { name: 'want-16-gpus', priority: 1, requests: { gpu: 16, cpu_milli: 1000, memory_mib: 4096 }, command: ['true'] },
];

export async function seedCluster({ binary, repo, server, workDir }) {
  const { api, base } = server;
  const demo = path.join(repo, 'examples', 'demo');
  const agents = await startAgents({
    binary, base, api, workDir,
    inventories: DEMO_NODES.map((n) => path.join(demo, 'agents', `${n}.yaml`)),
  });
  await waitUntil(async () => {
    const nodes = await api.nodes();
    return DEMO_NODES.every((n) => nodes.some((x) => x.name === n && x.condition === 'Ready'));
  }, 20000, `the demo nodes ${DEMO_NODES.join(', ')} to register as Ready`);

  const { tasks } = JSON.parse(readFileSync(path.join(demo, 'tasks.json'), 'utf8'));
  await api.expect('POST', `${API}/tasks/batch`, { tasks: [...tasks, ...EXTRA_PENDING] }, [201]);
  const running = (ts, name) => ts.some((x) => x.name === name && x.state === 'running');
  await waitUntil(async () => {
    const ts = await api.tasks();
    return ['llama-pretrain-0', 'llama-pretrain-1', 'hparam-sweep-a', 'hparam-sweep-b'].every((n) => running(ts, n));
  }, 20000, 'the training group and the sweep trials to run');
  const urgent = JSON.parse(readFileSync(path.join(demo, 'urgent-task.json'), 'utf8'));
  await api.expect('POST', `${API}/tasks`, urgent, [201]);
  await waitUntil(async () => running(await api.tasks(), urgent.name), 20000, 'the urgent fine-tune to preempt a trial and run');

  const viewerToken = await api.makeToken('viewer', 'e2e-viewer');
  const taskIds = {};
  for (const x of await api.tasks()) if (!(x.name in taskIds)) taskIds[x.name] = x.id;
  const pending = (await api.tasks()).filter((x) => x.state === 'pending');
  return { agents, viewerToken, taskIds, pending };
}
