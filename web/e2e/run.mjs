#!/usr/bin/env node
// Browser tests of the HeteroFlow admin UI, in Debian's headless Chromium
// driven by playwright-core (no browser is ever downloaded).
//
//   node web/e2e/run.mjs --binary BUILD/heteroflow [--ui-dir DIR] [--out SCREENSHOT_DIR]
//                        [--only NAME[,NAME...]] [--chromium /usr/bin/chromium]
//   npm run e2e --prefix web -- --binary ... (relative paths are taken from
//                        the directory npm was started in)
//
// It starts a real `heteroflow server` on a free port with a temporary data
// dir and the demo policy (examples/demo/server.yaml), the demo's real
// agents and tasks, makes a viewer token, and runs the checks one after
// another so that one failure does not hide the others. Each prints
// "ok   NAME" or "FAIL: NAME: why"; the exit code is 1 when any failed, 2 on a
// usage error. Screenshots (test artifacts, never committed) go to --out
// (default: a temporary dir, printed). Everything started is stopped and the
// temporary dirs removed, also on failure and on Ctrl-C.
import { existsSync, mkdtempSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { cleanupAll, makeTempDir, onCleanup, startServer } from './harness.mjs';
import { seedCluster } from './seed.mjs';
import { CheckFailure, notes } from './browser.mjs';
import {
  checkBundle, checkChinese, checkConfig, checkExclusive, checkJobs, checkLogin, checkPreview, checkQueues, checkScreenshots,
  checkTaskWaiting, checkToggle, checkViewer,
} from './checks.mjs';
import { checkInference } from './inference.mjs';
import { checkVendors } from './vendors.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '..', '..');

const CHECKS = [
  ['login', checkLogin],
  ['plugin-toggle', checkToggle],
  ['binpack-spread-exclusive', checkExclusive],
  ['config-validation', checkConfig],
  ['live-preview', checkPreview],
  ['chinese', checkChinese],
  ['viewer-readonly', checkViewer],
  ['task-waiting', checkTaskWaiting],
  ['jobs', checkJobs],
  ['queues', checkQueues],
  ['inference', checkInference],
  ['vendors', checkVendors],
  ['screenshots', checkScreenshots],
  ['bundle-size', checkBundle],
];
const CHECK_TIMEOUT_MS = 120000;

function usage(msg) {
  if (msg) console.error(`run.mjs: ${msg}`);
  console.error('usage: node web/e2e/run.mjs --binary BUILD/heteroflow [--ui-dir DIR] [--out DIR] [--only NAME,...] [--chromium PATH]');
  console.error(`checks: ${CHECKS.map((c) => c[0]).join(', ')}`);
  process.exit(2);
}

function parseArgs(argv) {
  // npm run changes the working directory to web/; INIT_CWD is where it was started.
  const cwd = process.env.INIT_CWD || process.cwd();
  const opts = { chromium: '/usr/bin/chromium' };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const m = a.match(/^--([a-z-]+)(?:=(.*))?$/);
    if (!m) usage(`unexpected argument ${a}`);
    const key = m[1];
    if (!['binary', 'ui-dir', 'out', 'only', 'chromium'].includes(key)) usage(`unknown flag --${key}`);
    const value = m[2] !== undefined ? m[2] : argv[++i];
    if (value === undefined) usage(`--${key} needs a value`);
    opts[key] = value;
  }
  if (!opts.binary) usage('--binary is required');
  for (const k of ['binary', 'ui-dir', 'out', 'chromium']) if (opts[k]) opts[k] = path.resolve(cwd, opts[k]);
  if (!opts['ui-dir']) opts['ui-dir'] = path.join(path.dirname(opts.binary), 'ui');
  if (!existsSync(opts.binary)) usage(`no heteroflow binary at ${opts.binary}`);
  if (!existsSync(path.join(opts['ui-dir'], 'index.html'))) usage(`no built UI at ${opts['ui-dir']} (index.html missing)`);
  if (!existsSync(opts.chromium)) usage(`no Chromium at ${opts.chromium} (apt-get install chromium)`);
  if (!opts.out) opts.out = mkdtempSync(path.join(tmpdir(), 'hf-ui-e2e-shots-'));
  if (opts.only) {
    opts.only = opts.only.split(',');
    for (const n of opts.only) if (!CHECKS.some((c) => c[0] === n)) usage(`unknown check ${n}`);
  }
  return opts;
}

async function loadPlaywright() {
  // From web/node_modules (a devDependency), else from NODE_PATH.
  const require = createRequire(import.meta.url);
  const paths = [here, ...(process.env.NODE_PATH || '').split(path.delimiter).filter(Boolean)];
  let resolved;
  try {
    resolved = require.resolve('playwright-core', { paths });
  } catch {
    console.error('FAIL: playwright-core is not installed (npm ci --prefix web)');
    process.exit(1);
  }
  return require(resolved);
}

function withTimeout(promise, ms, what) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: did not finish within ${ms / 1000} s`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

// An unexpected error (a Playwright timeout, a bug here): its message without
// colour codes, the locator it waited for, and where in the checks it happened.
function brief(e) {
  if (!e || !e.stack) return String(e);
  // eslint-disable-next-line no-control-regex
  const lines = e.stack.replace(/\x1b\[[0-9;]*m/g, '').split('\n').map((l) => l.trim()).filter(Boolean);
  const head = lines.filter((l) => !l.startsWith('at ') && l !== 'Call log:').slice(0, 3);
  const at = lines.find((l) => /checks\.mjs|seed\.mjs/.test(l));
  return `${head.join(' | ')}${at ? ` (${at.replace(/^at /, '').replace(/.*\/web\/e2e\//, '')})` : ''}`;
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  for (const sig of ['SIGINT', 'SIGTERM']) {
    process.on(sig, async () => {
      console.error(`\n${sig}: stopping what this run started`);
      await cleanupAll();
      process.exit(130);
    });
  }
  const { chromium } = await loadPlaywright();
  const t0 = Date.now();
  const workDir = makeTempDir('hf-ui-e2e-');
  const server = await startServer({
    binary: opts.binary, uiDir: opts['ui-dir'], config: path.join(repo, 'examples', 'demo', 'server.yaml'), workDir,
  });
  console.log(`server ${server.base} (data ${server.dataDir}, ui ${opts['ui-dir']})`);
  const index = await fetch(`${server.base}/`);
  const html = await index.text();
  if (index.status !== 200 || !/<div id="app"|<script/i.test(html)) {
    throw new Error(`GET / does not serve the UI from ${opts['ui-dir']}: ${index.status} ${html.slice(0, 200)}`);
  }
  const seeded = await seedCluster({ binary: opts.binary, repo, server, workDir });
  console.log(`cluster: ${seeded.agents.children.length} agents, ${Object.keys(seeded.taskIds).length} tasks, ${seeded.pending.length} pending (${seeded.pending.map((x) => x.name).join(', ')})`);

  const browser = await chromium.launch({ executablePath: opts.chromium, headless: true });
  onCleanup(() => browser.close());
  const t = {
    browser, base: server.base, api: server.api, adminToken: server.adminToken,
    viewerToken: seeded.viewerToken, taskIds: seeded.taskIds, out: opts.out, repo, workDir,
  };
  const failed = [];
  let passed = 0;
  for (const [name, fn] of CHECKS) {
    if (opts.only && !opts.only.includes(name)) continue;
    const start = Date.now();
    try {
      await withTimeout(fn(t), CHECK_TIMEOUT_MS, name);
      passed++;
      console.log(`ok   ${name} (${((Date.now() - start) / 1000).toFixed(1)} s)`);
    } catch (e) {
      failed.push(name);
      const msg = e instanceof CheckFailure ? e.message : brief(e);
      console.log(`FAIL: ${name}: ${msg}`);
    }
  }
  if (server.child.exitCode !== null || server.child.signalCode !== null) {
    failed.push('server');
    console.log(`FAIL: server: exited during the run (${server.child.exitCode ?? server.child.signalCode})`);
  }
  console.log(`screenshots: ${opts.out}`);
  if (notes.size) console.log(`contract notes:\n  - ${[...notes].join('\n  - ')}`);
  const took = ((Date.now() - t0) / 1000).toFixed(1);
  if (failed.length) {
    console.log(`FAIL: ui e2e: ${failed.length} of ${failed.length + passed} checks failed (${failed.join(', ')}) in ${took} s`);
    return 1;
  }
  console.log(`PASS: ui e2e: ${passed} checks in ${took} s`);
  return 0;
}

let code = 1;
try {
  code = await main();
} catch (e) {
  console.log(`FAIL: ui e2e: ${(e && e.stack) || e}`);
  code = 1;
} finally {
  await cleanupAll();
}
process.exit(code);
