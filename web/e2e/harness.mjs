// The real processes behind the browser tests: one `heteroflow server` on a
// free port with a temporary data dir, the demo's four node agents, an HTTP
// client for the REST API, and a cleanup list that stops everything this run
// started (server, agents, the agents' task processes, temp dirs) even when a
// check throws or the runner is interrupted.
//
// Only processes this run started are signalled, each by its pid (task
// processes are found as those whose cwd lies under this run's agent work
// dirs, which only our agents create).
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync, mkdirSync, openSync, closeSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

export const API = '/api/v1';

const cleanups = [];
let cleaned = false;

/** Registers fn to run at cleanup, last registered first. */
export function onCleanup(fn) {
  cleanups.push(fn);
}

/** Runs every cleanup once; never throws. */
export async function cleanupAll() {
  if (cleaned) return;
  cleaned = true;
  while (cleanups.length) {
    const fn = cleanups.pop();
    try {
      await fn();
    } catch (e) {
      console.error(`cleanup: ${e && e.message ? e.message : e}`);
    }
  }
}

export function makeTempDir(prefix) {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  onCleanup(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function waitExit(child, ms) {
  if (child.exitCode !== null || child.signalCode !== null) return true;
  return Promise.race([
    new Promise((resolve) => child.once('exit', () => resolve(true))),
    sleep(ms).then(() => false),
  ]);
}

/** SIGTERM, then SIGKILL after `graceMs`. */
async function stopChild(child, graceMs = 5000) {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  try {
    child.kill('SIGTERM');
  } catch {
    return;
  }
  if (!(await waitExit(child, graceMs))) {
    try {
      child.kill('SIGKILL');
    } catch {
      /* gone */
    }
    await waitExit(child, 2000);
  }
}

/** Pids of processes whose working directory lies under `dir`. */
function pidsUnder(dir) {
  const out = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cwd = readlinkSync(`/proc/${entry}/cwd`);
      if (cwd === dir || cwd.startsWith(dir + '/')) out.push(Number(entry));
    } catch {
      /* exited, or not ours to read */
    }
  }
  return out;
}

export class ApiError extends Error {}

/** A minimal REST client; `token` is the bearer token used by default. */
export class Api {
  constructor(base, token) {
    this.base = base;
    this.token = token;
  }

  async call(method, route, body, token = this.token) {
    const headers = {};
    if (token) headers.Authorization = `Bearer ${token}`;
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const res = await fetch(this.base + route, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    let json = null;
    try {
      json = text ? JSON.parse(text) : null;
    } catch {
      json = null;
    }
    return { status: res.status, body: json, text, headers: res.headers };
  }

  /** The parsed body when the status is one of `want`; throws otherwise. */
  async expect(method, route, body, want = [200], token) {
    const r = await this.call(method, route, body, token);
    const ok = Array.isArray(want) ? want : [want];
    if (!ok.includes(r.status)) {
      throw new ApiError(`${method} ${route}: want HTTP ${ok.join('/')}, got ${r.status} ${r.text.slice(0, 300)}`);
    }
    return r.body;
  }

  get(route, token) {
    return this.expect('GET', route, undefined, [200], token);
  }

  async plugins() {
    const b = await this.get(`${API}/plugins`);
    return Object.fromEntries(b.plugins.map((p) => [p.name, p]));
  }

  config() {
    return this.get(`${API}/scheduler/config`);
  }

  async tasks() {
    const b = await this.get(`${API}/tasks?limit=1000`);
    return b.tasks;
  }

  async nodes() {
    const b = await this.get(`${API}/nodes`);
    return b.nodes;
  }

  // An agent token is bound to `node`.
  async makeToken(role, name, node) {
    const body = { name: name || `e2e-${role}-${randomBytes(3).toString('hex')}`, role };
    if (node) body.node = node;
    const b = await this.expect('POST', `${API}/tokens`, body, [201]);
    if (!/^hf_[0-9a-f]{64}$/.test(String(b.token))) throw new ApiError(`token creation answer lacks a token: ${JSON.stringify(b)}`);
    return b.token;
  }
}

/** Polls fn until it returns a truthy value; throws after `ms` with `what`. */
export async function waitUntil(fn, ms, what, interval = 100) {
  const deadline = Date.now() + ms;
  let last;
  for (;;) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    if (Date.now() >= deadline) {
      const detail = last instanceof Error ? last.message : JSON.stringify(last);
      throw new Error(`timed out after ${ms} ms waiting for ${what} (last: ${String(detail).slice(0, 300)})`);
    }
    await sleep(interval);
  }
}

/**
 * Starts `heteroflow server --listen 127.0.0.1:0 --data-dir <tmp> --ui-dir <ui>
 * --config <config>` and resolves once it printed "listening on http://...:PORT".
 */
export async function startServer({ binary, uiDir, config, workDir }) {
  const dataDir = path.join(workDir, 'data');
  mkdirSync(dataDir, { recursive: true });
  const adminToken = 'hf_' + randomBytes(32).toString('hex');
  const args = ['server', '--listen', '127.0.0.1:0', '--data-dir', dataDir, '--ui-dir', uiDir];
  if (config) args.push('--config', config);
  const logPath = path.join(workDir, 'server.stderr');
  const errFd = openSync(logPath, 'w');
  const env = { ...process.env, HETEROFLOW_ADMIN_TOKEN: adminToken };
  const child = spawn(binary, args, { env, stdio: ['ignore', 'pipe', errFd] });
  closeSync(errFd);
  onCleanup(() => stopChild(child, 10000));
  let out = '';
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server printed no "listening on" line in 30 s: ${out} ${tail(logPath)}`)), 30000);
    child.stdout.on('data', (chunk) => {
      out += chunk.toString();
      const m = out.match(/listening on http:\/\/[^\s:]+:(\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    child.once('exit', (code, sig) => {
      clearTimeout(timer);
      reject(new Error(`server exited (${code ?? sig}) before listening: ${out} ${tail(logPath)}`));
    });
    child.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
  });
  child.stdout.resume();
  const base = `http://127.0.0.1:${port}`;
  const api = new Api(base, adminToken);
  await waitUntil(async () => (await api.call('GET', '/readyz')).status === 200, 15000, 'GET /readyz 200');
  return { child, base, port, api, adminToken, dataDir, logPath };
}

function tail(file, n = 2000) {
  try {
    const s = readFileSync(file, 'utf8');
    return s.slice(-n);
  } catch {
    return '';
  }
}

/**
 * Starts one real agent per inventory file; at cleanup stops the agents
 * (SIGTERM) and then the task processes they left running.
 */
// One agent per inventory, each with a token bound to its node (made with
// `api`), handed over as a 0600 file.
export async function startAgents({ binary, base, api, inventories, workDir }) {
  const agentsDir = path.join(workDir, 'agents');
  mkdirSync(agentsDir, { recursive: true });
  const children = [];
  onCleanup(async () => {
    await Promise.all(children.map((c) => stopChild(c, 5000)));
    // Tasks run in their own process groups and outlive a stopped agent.
    for (let round = 0; round < 3; round++) {
      const pids = pidsUnder(agentsDir);
      if (!pids.length) return;
      for (const pid of pids) {
        try {
          process.kill(pid, round < 2 ? 'SIGTERM' : 'SIGKILL');
        } catch {
          /* gone */
        }
      }
      await sleep(500);
    }
  });
  for (const inv of inventories) {
    const name = path.basename(inv, path.extname(inv));
    const work = path.join(agentsDir, name);
    mkdirSync(work, { recursive: true });
    const logFd = openSync(path.join(agentsDir, `${name}.log`), 'w');
    const tokenFile = path.join(agentsDir, `${name}.token`);
    writeFileSync(tokenFile, `${await api.makeToken('agent', `e2e-agent-${name}`, name)}\n`, { mode: 0o600 });
    const child = spawn(binary, ['agent', '--server', base, '--token-file', tokenFile, '--inventory', inv, '--work-dir', work], {
      stdio: ['ignore', logFd, logFd],
      cwd: path.dirname(inv),
    });
    closeSync(logFd);
    children.push(child);
  }
  return { children, agentsDir, alive: () => children.every((c) => c.exitCode === null && alive(c.pid)) };
}
