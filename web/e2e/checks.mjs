// The browser checks. Each takes the run's context `t`:
//   t.browser, t.base (server URL), t.api (admin REST client), t.adminToken,
//   t.viewerToken, t.out (screenshot dir), t.taskIds ({name: id}).
// Each check opens its own browser context, so sessionStorage starts empty,
// and puts back what it changed through the API, so checks do not depend on
// each other's order.
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { API, waitUntil } from './harness.mjs';
import {
  assert, chartTextProblems, CheckFailure, drawerHeaderProblems, fail, inputOf, isDisabled, layoutProblems, login, mutating,
  newPage, notes, open, recordRequests, switchState, tid, titleText, typeInto,
} from './browser.mjs';

const STATUS_ZH = ['已启用', '未启用', '错误', '配置中'];

async function statusText(page, name) {
  return (await tid(page, `plugin-status-${name}`).first().innerText()).trim();
}

async function waitStatus(page, name, want, ms = 8000) {
  return waitUntil(async () => (await statusText(page, name)) === want, ms,
    `plugin-status-${name} to read "${want}"`);
}

async function withPage(t, opts, fn) {
  const { context, page } = await newPage(t.browser, opts);
  try {
    return await fn(page);
  } finally {
    await context.close();
  }
}

// 1. Log in: a bad token shows login-error; the admin token gets in; the
// token never appears in a URL and is kept in sessionStorage only.
export async function checkLogin(t) {
  await withPage(t, {}, async (page) => {
    const reqs = recordRequests(page);
    await page.goto(`${t.base}/plugins`);
    await page.waitForURL((u) => u.pathname.startsWith('/login'), { timeout: 8000 })
      .catch(() => fail(`without a token /plugins did not send the browser to /login (at ${page.url()})`));
    assert(!(await tid(page, 'login-error').first().isVisible()), 'login-error visible before any attempt');
    await typeInto(page, 'login-token', 'hf_' + '0'.repeat(64), { blur: false });
    await tid(page, 'login-submit').first().click();
    await tid(page, 'login-error').first().waitFor({ state: 'visible' })
      .catch(() => fail('a bad token did not show login-error'));
    assert(new URL(page.url()).pathname.startsWith('/login'), `a bad token left the login page: ${page.url()}`);
    const badStored = await page.evaluate(() => sessionStorage.getItem('hf.token'));
    assert(!badStored, 'a refused token was kept in sessionStorage');

    await typeInto(page, 'login-token', t.adminToken, { blur: false });
    await tid(page, 'login-submit').first().click();
    await tid(page, 'page-title').first().waitFor({ state: 'visible' });
    await page.waitForURL((u) => !u.pathname.startsWith('/login'), { timeout: 8000 })
      .catch(() => fail(`the admin token did not leave /login (at ${page.url()})`));
    assert(!(await tid(page, 'login-error').first().isVisible()), 'login-error still visible after a good login');
    const who = (await tid(page, 'whoami').first().innerText()).trim();
    assert(/admin/i.test(who), `whoami shows "${who}", not the admin role`);
    const stored = await page.evaluate(() => ({ s: sessionStorage.getItem('hf.token'), l: JSON.stringify(localStorage) }));
    assert(stored.s === t.adminToken, 'the token is not in sessionStorage "hf.token"');
    assert(!stored.l.includes(t.adminToken), 'the token is in localStorage');
    await open(page, t.base, '/plugins'); // a full load keeps the session
    assert(new URL(page.url()).pathname === '/plugins', `reloading /plugins ended at ${page.url()}`);
    assert(!page.url().includes(t.adminToken), `the token is in the URL: ${page.url()}`);
    const leaked = reqs.filter((r) => r.url.includes(t.adminToken) || r.url.includes('0'.repeat(64)));
    assert(!leaked.length, `a request URL carries the token: ${leaked.map((r) => r.method + ' ' + r.url.replace(t.adminToken, '<token>')).join(', ')}`);
  });
}

// 2. Toggle a plugin off and back on; the state survives a reload and the API agrees.
export async function checkToggle(t) {
  const name = 'topology';
  await withPage(t, {}, async (page) => {
    await login(page, t.base, t.adminToken);
    await open(page, t.base, '/plugins');
    // Filters have no weight; load_threshold shows the scheduler config's
    // thresholds, read-only, with the way to change them.
    await tid(page, 'plugin-row-fit').first().waitFor({ state: 'visible' });
    for (const filter of ['fit', 'load_threshold']) {
      assert(!(await tid(page, `plugin-weight-${filter}`).count()), `plugin-weight-${filter} is shown for a filter`);
    }
    assert(await tid(page, 'plugin-weight-binpack').count(), 'plugin-weight-binpack is missing');
    const config = await t.api.config();
    for (const k of ['load_threshold', 'gpu_load_threshold', 'memory_threshold']) {
      const shown = (await tid(page, `plugin-threshold-${k}`).first().innerText()).trim();
      assert(Number(shown) === config[k], `plugin-threshold-${k} shows "${shown}", the config says ${config[k]}`);
    }
    await tid(page, 'plugin-thresholds-edit').first().click();
    await page.waitForURL(/\/config$/, { timeout: 5000 });
    await open(page, t.base, '/plugins');
    const before = (await t.api.plugins())[name];
    assert(before.enabled, `${name} should start enabled: ${JSON.stringify(before)}`);
    assert((await statusText(page, name)) === 'active', `plugin-status-${name} reads "${await statusText(page, name)}", want "active"`);
    assert((await switchState(page, `plugin-toggle-${name}`)) === true, `plugin-toggle-${name} is not on while ${name} is enabled`);
    try {
      await tid(page, `plugin-toggle-${name}`).first().click();
      await waitStatus(page, name, 'inactive');
      await waitUntil(async () => !(await t.api.plugins())[name].enabled, 5000, `the API to report ${name} disabled`);
      await page.reload();
      await tid(page, `plugin-status-${name}`).first().waitFor({ state: 'visible' });
      assert((await statusText(page, name)) === 'inactive', `after a reload plugin-status-${name} reads "${await statusText(page, name)}"`);
      assert((await switchState(page, `plugin-toggle-${name}`)) === false, `after a reload plugin-toggle-${name} is on again`);
      await tid(page, `plugin-toggle-${name}`).first().click();
      await waitStatus(page, name, 'active');
      await waitUntil(async () => (await t.api.plugins())[name].enabled, 5000, `the API to report ${name} enabled again`);
    } finally {
      await t.api.call('PUT', `${API}/plugins/${name}`, { enabled: true });
    }
  });
}

// 3. Enabling spread while binpack is on: plugin-error names binpack and
// explains; spread stays off.
export async function checkExclusive(t) {
  await withPage(t, {}, async (page) => {
    await login(page, t.base, t.adminToken);
    await open(page, t.base, '/plugins');
    const reqs = recordRequests(page);
    const before = await t.api.plugins();
    assert(before.binpack.enabled && !before.spread.enabled, 'want binpack on and spread off to start');
    assert(!(await tid(page, 'plugin-error').first().isVisible()), 'plugin-error shown before anything was tried');
    await tid(page, 'plugin-toggle-spread').first().click();
    const err = tid(page, 'plugin-error').first();
    await err.waitFor({ state: 'visible' }).catch(() => fail('no plugin-error after enabling spread while binpack is on'));
    const text = (await err.innerText()).trim();
    assert(/binpack/.test(text), `plugin-error does not name binpack: "${text}"`);
    const apiAnswer = await t.api.call('PUT', `${API}/plugins/spread`, { enabled: true });
    assert(apiAnswer.status === 409, `the API itself answered ${apiAnswer.status} to enabling spread`);
    const apiMsg = apiAnswer.body && apiAnswer.body.error && apiAnswer.body.error.message;
    assert(apiMsg && text.includes(apiMsg), `plugin-error does not hold the API's message "${apiMsg}": "${text}"`);
    const explanation = text.replace(apiMsg, '').trim();
    assert(/cannot both|both be enabled|disable one|mutually exclusive/i.test(explanation),
      `plugin-error does not explain beyond the API's message (want e.g. "binpack and spread cannot both be enabled: disable one first"): "${text}"`);
    // Said once, in place: one plugin-error beside the switch, no toast, and
    // neither the API's message nor the explanation anywhere else on the page.
    await sleep(1000);
    const toasts = await page.locator('.el-message:visible, .el-notification:visible').allInnerTexts();
    assert(!toasts.length, `the refusal is also shown as a toast: ${toasts.map((x) => `"${x.trim()}"`).join(', ')}`);
    const shown = await tid(page, 'plugin-error').locator('visible=true').count();
    assert(shown === 1, `${shown} plugin-error messages are shown, want one`);
    const body = await page.evaluate(() => document.body.innerText);
    const times = (s) => body.split(s).length - 1;
    assert(times(apiMsg) === 1, `the API's message is shown ${times(apiMsg)} times on the page, want once`);
    assert(times(explanation) === 1, `the explanation is shown ${times(explanation)} times on the page, want once`);
    const card = await tid(page, 'plugin-row-spread').first().boundingBox();
    const sw = await tid(page, 'plugin-toggle-spread').first().boundingBox();
    const eb = await err.boundingBox();
    const inside = eb.x >= card.x && eb.x + eb.width <= card.x + card.width && eb.y >= card.y && eb.y + eb.height <= card.y + card.height;
    assert(inside, 'plugin-error is not inside the spread card');
    const below = eb.y - (sw.y + sw.height);
    assert(below >= 0 && below <= 32, `plugin-error is ${Math.round(below)} px below the spread switch, not next to it`);
    await waitUntil(async () => (await switchState(page, 'plugin-toggle-spread')) === false, 3000,
      'plugin-toggle-spread to return to off');
    assert((await statusText(page, 'spread')) === 'inactive', `plugin-status-spread reads "${await statusText(page, 'spread')}"`);
    const after = await t.api.plugins();
    assert(!after.spread.enabled && after.binpack.enabled, `the API changed: binpack ${after.binpack.enabled}, spread ${after.spread.enabled}`);
    const puts = mutating(reqs).filter((r) => r.url.endsWith('/plugins/spread'));
    assert(puts.length >= 1, 'the page did not ask the API (no PUT /plugins/spread); the error must come from the API');
  });
}

async function configError(page, field) {
  // The contract names `config-error-<field>`; a weight's field is taken as
  // "weight-<plugin>" (the input is config-weight-<plugin>).
  const loc = page.locator(`[data-testid="config-error-${field}"]`);
  return loc.first();
}

// 4. Weights and thresholds: invalid values are refused at the field and
// nothing is sent; a valid change is saved.
export async function checkConfig(t) {
  const orig = await t.api.config();
  const origPlugins = await t.api.plugins();
  try {
    await withPage(t, {}, async (page) => {
      await login(page, t.base, t.adminToken);
      const reqs = recordRequests(page);
      const cases = [
        ['load_threshold', '1.5'], ['load_threshold', '0'], ['load_threshold', 'abc'],
        ['gpu_load_threshold', '-0.2'], ['weight-binpack', '-1'], ['weight-binpack', 'abc'],
      ];
      for (const [field, bad] of cases) {
        await open(page, t.base, '/config');
        const inputId = `config-${field}`;
        await inputOf(page, inputId);
        const n0 = reqs.length;
        const typed = await typeInto(page, inputId, bad);
        const shown = await inputOf(page, inputId).then((i) => i.inputValue());
        await tid(page, 'config-save').first().click();
        await sleep(400);
        const err = await configError(page, field);
        const visible = await err.isVisible();
        const sent = mutating(reqs.slice(n0));
        assert(!sent.length, `${field}=${bad}: the page sent ${sent.map((r) => `${r.method} ${r.url} ${r.body}`).join('; ')}`);
        if (!visible) {
          // A number input that never took the text refuses it as well.
          const refused = !typed || (bad === 'abc' && shown === '');
          assert(refused, `${field}=${bad}: no visible config-error-${field} (field shows "${shown}")`);
          notes.add(`config-${field}: "${bad}" cannot be typed (a number input), so no config-error-${field} is shown`);
        } else {
          const msg = (await err.innerText()).trim();
          assert(msg.length > 0, `config-error-${field} is empty`);
        }
      }
      const now = await t.api.config();
      assert(JSON.stringify(now) === JSON.stringify(orig), `invalid values changed the config: ${JSON.stringify(orig)} -> ${JSON.stringify(now)}`);

      // A valid change: one threshold and one weight.
      await open(page, t.base, '/config');
      const n0 = reqs.length;
      await typeInto(page, 'config-load_threshold', '0.75');
      await typeInto(page, 'config-weight-binpack', '3');
      await tid(page, 'config-save').first().click();
      await waitUntil(async () => {
        const c = await t.api.config();
        return c.load_threshold === 0.75 && c.score_weights.binpack === 3;
      }, 5000, 'the API to report load_threshold 0.75 and binpack weight 3');
      assert((await t.api.plugins()).binpack.weight === 3, 'GET /plugins does not show binpack weight 3');
      const sent = mutating(reqs.slice(n0));
      assert(sent.length >= 1, 'no request was sent for a valid change');
      const toast = page.locator('.el-message--success, .el-notification');
      if (!(await toast.first().isVisible().catch(() => false))) notes.add('config-save: no success toast seen (.el-message--success)');
      await page.reload();
      await inputOf(page, 'config-load_threshold');
      await waitUntil(async () => Number(await (await inputOf(page, 'config-load_threshold')).inputValue()) === 0.75, 3000,
        'the reloaded config page to show load_threshold 0.75');

      // The Plugins page's weight field: saved on blur; -1 refused.
      await open(page, t.base, '/plugins');
      const n1 = reqs.length;
      await typeInto(page, 'plugin-weight-rdma', '-1');
      await sleep(500);
      const badSent = mutating(reqs.slice(n1)).filter((r) => r.body.includes('-1'));
      assert(!badSent.length, `plugin-weight-rdma -1 was sent: ${badSent.map((r) => r.method + ' ' + r.url + ' ' + r.body).join('; ')}`);
      assert((await t.api.plugins()).rdma.weight === origPlugins.rdma.weight, 'plugin-weight-rdma -1 changed the weight');
      await open(page, t.base, '/plugins');
      await typeInto(page, 'plugin-weight-rdma', '4');
      await waitUntil(async () => (await t.api.plugins()).rdma.weight === 4, 5000, 'the API to report rdma weight 4 after blur');
    });
  } finally {
    await t.api.call('PUT', `${API}/scheduler/config`, {
      load_threshold: orig.load_threshold, gpu_load_threshold: orig.gpu_load_threshold,
      memory_threshold: orig.memory_threshold,
    });
    for (const n of ['binpack', 'rdma']) await t.api.call('PUT', `${API}/plugins/${n}`, { weight: origPlugins[n].weight });
  }
}

async function runPreview(page, { binpack = false, spread = true, workload = 'cluster' } = {}) {
  await tid(page, 'preview-open').first().click();
  await tid(page, 'preview-panel').first().waitFor({ state: 'visible' });
  // The workload: an el-radio-button per choice, each marked data-workload.
  const choice = tid(page, 'preview-workload').first().locator(`[data-workload="${workload}"]`);
  await choice.first().click()
    .catch(() => fail(`preview-workload has no "${workload}" choice`));
  await waitUntil(async () => /\bis-active\b/.test((await choice.first().getAttribute('class')) || ''), 3000,
    `the "${workload}" workload to be chosen`);
  for (const [name, want] of [['binpack', binpack], ['spread', spread]]) {
    const id = `candidate-toggle-${name}`;
    if ((await switchState(page, id)) !== want) await tid(page, id).first().click();
    await waitUntil(async () => (await switchState(page, id)) === want, 3000, `${id} to be ${want ? 'on' : 'off'}`);
  }
  await tid(page, 'preview-run').first().click();
  await tid(page, 'preview-moved').first().waitFor({ state: 'visible' });
  await waitUntil(async () => /^\d+$/.test((await tid(page, 'preview-moved').first().innerText()).trim()), 8000,
    'preview-moved to hold a number');
}

// 5. Live preview: on the "cluster" workload (every task re-placed on an
// empty copy of the cluster), binpack off + spread on places tasks
// differently; the live policy is unchanged until apply.
export async function checkPreview(t) {
  const before = await t.api.plugins();
  const configBefore = await t.api.config();
  const serverView = await t.api.expect('POST', `${API}/scheduler/preview`,
    { plugins: { binpack: { enabled: false }, spread: { enabled: true } }, workload: 'cluster' });
  const problems = [];
  try {
    await withPage(t, {}, async (page) => {
      await login(page, t.base, t.adminToken);
      await open(page, t.base, '/plugins');
      const reqs = recordRequests(page);
      // The rows are compared with the answer the page itself received: the
      // cluster workload is every live task, and a task may finish between
      // the call above and the page's own.
      const answers = [];
      page.on('response', (r) => {
        if (r.request().method() === 'POST' && r.url().endsWith('/scheduler/preview')) answers.push(r.json().catch(() => null));
      });
      await runPreview(page);
      for (const p of await drawerHeaderProblems(page)) problems.push(p);
      assert(answers.length >= 1, 'preview-run got no answer to POST /api/v1/scheduler/preview');
      const pageView = await answers[answers.length - 1];
      assert(pageView && Array.isArray(pageView.tasks), 'the page\'s preview answer is not a preview');
      const sent = reqs.filter((r) => r.method === 'POST' && r.url.endsWith('/scheduler/preview'));
      assert(sent.length >= 1, 'preview-run sent no POST /api/v1/scheduler/preview');
      const body = JSON.parse(sent[sent.length - 1].body || '{}');
      assert(body.plugins && body.plugins.binpack && body.plugins.binpack.enabled === false &&
        body.plugins.spread && body.plugins.spread.enabled === true,
        `the preview request does not carry binpack off + spread on: ${sent[sent.length - 1].body}`);
      assert(body.workload === 'cluster' && !body.tasks,
        `the preview request does not ask for the "cluster" workload: ${sent[sent.length - 1].body}`);
      for (const id of ['preview-current-util', 'preview-candidate-util', 'preview-current-frag', 'preview-candidate-frag']) {
        assert(await tid(page, id).first().isVisible(), `${id} not visible`);
      }
      const util = (await tid(page, 'preview-current-util').first().innerText()).trim();
      assert(/\d/.test(util) && /%/.test(util), `preview-current-util "${util}" is not a percentage`);
      const moved = Number((await tid(page, 'preview-moved').first().innerText()).trim());
      const rows = await tid(page, 'preview-row').evaluateAll((els) => els.map((e) => ({
        name: e.getAttribute('data-task-name'),
        cur: (e.querySelector('.current-node') || {}).innerText,
        cand: (e.querySelector('.candidate-node') || {}).innerText,
      })));
      assert(rows.length === pageView.tasks.length,
        `${rows.length} preview-row for ${pageView.tasks.length} tasks in the server's answer`);
      assert(rows.every((r) => r.name), 'a preview-row lacks data-task-name');
      assert(rows.every((r) => r.cur !== undefined && r.cand !== undefined), 'a preview-row lacks .current-node or .candidate-node');
      const differing = rows.filter((r) => r.cur.trim() !== r.cand.trim());
      const live = await t.api.plugins();
      assert(live.binpack.enabled === before.binpack.enabled && live.spread.enabled === before.spread.enabled,
        'running the preview changed the live plugins');
      if (!(moved > 0 && differing.length > 0)) {
        problems.push(`placements do not differ: preview-moved ${moved}, rows whose nodes differ ${differing.length} of ${rows.length} ` +
          `(the server's own preview of the cluster workload: moved ${serverView.moved}, ` +
          `${serverView.current.scheduled} placed under the current policy; tasks: ` +
          `${serverView.tasks.map((x) => `${x.name}: ${x.current.node ?? 'unplaced'}`).join(', ')})`);
      }
      assert(moved === pageView.moved, `preview-moved ${moved}, the server's answer ${pageView.moved}`);

      // Expand the first row: the per-node table.
      await tid(page, 'preview-row').first().click();
      const nodesTable = tid(page, 'preview-nodes').first();
      if (!(await nodesTable.isVisible().catch(() => false))) {
        const expand = tid(page, 'preview-row').first().locator('.el-table__expand-icon');
        if (await expand.count()) await expand.first().click();
      }
      await nodesTable.waitFor({ state: 'visible', timeout: 3000 }).catch(() => fail('expanding a preview-row shows no preview-nodes'));

      // Apply: the live policy becomes the candidate.
      await tid(page, 'preview-apply').first().click();
      await waitUntil(async () => {
        const p = await t.api.plugins();
        return !p.binpack.enabled && p.spread.enabled;
      }, 5000, 'the API to report binpack off and spread on after preview-apply');
      await tid(page, 'preview-panel').first().waitFor({ state: 'hidden', timeout: 5000 })
        .catch(() => fail('preview-panel still open after apply'));
      assert((await statusText(page, 'spread')) === 'active', 'after apply plugin-status-spread is not "active"');
    }).catch((e) => problems.push(e instanceof CheckFailure ? e.message : e.message.split('\n')[0]));
    const cfg = await t.api.config();
    assert(cfg.load_threshold === configBefore.load_threshold, 'the preview changed the scheduler config');
    if (problems.length) fail(problems.join('\n    '));
  } finally {
    await t.api.call('PUT', `${API}/plugins/spread`, { enabled: false });
    await t.api.call('PUT', `${API}/plugins/binpack`, { enabled: true });
  }
}

// 6. Chinese: the titles of Plugins, Scheduler config and Inference.
export async function checkChinese(t) {
  await withPage(t, { lang: 'en' }, async (page) => {
    await login(page, t.base, t.adminToken);
    await open(page, t.base, '/plugins');
    assert((await titleText(page)) === 'Plugins', `English title of /plugins is "${await titleText(page)}"`);
    await tid(page, 'lang-toggle').first().click();
    await waitUntil(async () => (await titleText(page)) === '插件管理', 3000, 'the Plugins title to read 插件管理');
    const st = await statusText(page, 'binpack');
    assert(STATUS_ZH.includes(st), `plugin-status-binpack in Chinese reads "${st}"`);
    const want = { plugins: '插件管理', config: '调度器配置', inference: '推理控制面板' };
    for (const [nav, title] of Object.entries(want)) {
      await tid(page, `nav-${nav}`).first().click();
      await waitUntil(async () => (await titleText(page)) === title, 4000, `the ${nav} page title to read ${title}`);
    }
    await page.reload();
    await tid(page, 'page-title').first().waitFor({ state: 'visible' });
    assert((await titleText(page)) === '推理控制面板', `after a reload the language went back: "${await titleText(page)}"`);
    const kept = await page.evaluate(() => localStorage.getItem('hf.lang'));
    assert(kept && /^zh/.test(kept), `localStorage "hf.lang" is ${kept}`);
    await tid(page, 'lang-toggle').first().click();
    await waitUntil(async () => (await titleText(page)) === 'Inference', 3000, 'the title to read Inference after switching back');
  });
}

async function stableState(t) {
  const plugins = await t.api.plugins();
  const nodes = (await t.api.nodes()).map((n) => [n.name, n.condition]);
  const audit = await t.api.get(`${API}/audit?limit=20`);
  const cancelled = (await t.api.tasks()).filter((x) => x.state === 'cancelled').map((x) => x.id);
  return JSON.stringify({
    plugins: Object.values(plugins).map((p) => [p.name, p.enabled, p.weight, p.mode ?? null]),
    config: await t.api.config(), nodes, audit: audit.entries.map((e) => e.id), cancelled,
  });
}

// 7. A viewer: every mutating control disabled, readonly-banner shown,
// clicks change nothing (the API agrees), and the page sends no PUT, POST or
// DELETE at all (a confirmation dialog, should one open, is accepted).
export async function checkViewer(t) {
  // A cordoned node, so that its uncordon button is one an admin could press.
  await t.api.expect('POST', `${API}/nodes/cpu-1/cordon`, {});
  try {
    await viewerChecks(t);
  } finally {
    await t.api.call('POST', `${API}/nodes/cpu-1/uncordon`, {});
  }
}

async function viewerChecks(t) {
  const before = await stableState(t);
  const problems = [];
  await withPage(t, {}, async (page) => {
    const reqs = recordRequests(page);
    try {
      await login(page, t.base, t.viewerToken);
      await tid(page, 'readonly-banner').first().waitFor({ state: 'visible' }).catch(() => problems.push('no readonly-banner for a viewer'));
      const who = (await tid(page, 'whoami').first().innerText()).trim();
      if (!/viewer/i.test(who)) problems.push(`whoami shows "${who}", not the viewer role`);
      const clickAll = async (selector, min, where) => {
        const loc = page.locator(selector);
        const n = await loc.count();
        if (n < min) problems.push(`${where}: want at least ${min} of ${selector}, found ${n}`);
        for (let i = 0; i < n; i++) {
          const el = loc.nth(i);
          const id = await el.getAttribute('data-testid');
          const enabled = !(await isDisabled(el));
          if (enabled) problems.push(`${where}: ${id} is enabled for a viewer`);
          await el.click({ force: true, timeout: 1500 }).catch(() => {});
          if (enabled) {
            // Accept a confirmation, should one open: still nothing may be sent.
            const ok = page.locator('.el-message-box__btns .el-button--primary').first();
            await ok.waitFor({ state: 'visible', timeout: 1000 }).then(() => ok.click()).catch(() => {});
            await sleep(300);
          }
          await page.keyboard.press('Escape').catch(() => {});
        }
      };
      await open(page, t.base, '/plugins');
      await tid(page, 'plugin-row-binpack').first().waitFor({ state: 'visible' });
      await clickAll('[data-testid^="plugin-toggle-"]', 5, 'plugins');
      await clickAll('[data-testid^="plugin-weight-"]', 1, 'plugins');
      await clickAll('[data-testid="plugin-mode-preempt"]', 1, 'plugins');
      await clickAll('[data-testid="plugin-reload-topology"]', 1, 'plugins');
      const previewOpen = tid(page, 'preview-open').first();
      if ((await previewOpen.isVisible()) && !(await isDisabled(previewOpen))) {
        await previewOpen.click();
        await tid(page, 'preview-panel').first().waitFor({ state: 'visible' });
        await clickAll('[data-testid="preview-apply"]', 1, 'preview');
        await page.keyboard.press('Escape');
      }
      await open(page, t.base, '/config');
      await clickAll('[data-testid^="config-"][data-testid$="threshold"]', 3, 'config');
      await clickAll('[data-testid^="config-weight-"]', 1, 'config');
      await clickAll('[data-testid="config-save"]', 1, 'config');
      await open(page, t.base, '/nodes');
      await tid(page, 'node-row-a100-1').first().waitFor({ state: 'visible' });
      await clickAll('[data-testid^="node-cordon-"], [data-testid^="node-drain-"], [data-testid^="node-uncordon-"]', 4, 'nodes');
      await open(page, t.base, '/tasks');
      await page.locator('[data-testid^="task-row-"]').first().waitFor({ state: 'visible' });
      const rowButtons = page.locator('[data-testid^="task-row-"] button');
      for (let i = 0; i < (await rowButtons.count()); i++) {
        const b = rowButtons.nth(i);
        if (/cancel|取消|delete|删除/i.test(await b.innerText()) && !(await isDisabled(b))) problems.push('tasks: a cancel button in a task row is enabled');
      }
      await open(page, t.base, `/tasks/${t.taskIds['llama-pretrain-0']}`);
      await clickAll('[data-testid="task-cancel"]', 1, 'task detail');
      await sleep(500);
    } catch (e) {
      problems.push(`stopped early: ${e.message.split('\n')[0]}`);
    }
    const bad = mutating(reqs);
    if (bad.length) problems.push(`the viewer's page sent ${bad.map((r) => `${r.method} ${new URL(r.url).pathname}`).join(', ')}`);
  });
  const after = await stableState(t);
  if (before !== after) problems.push(`the viewer's clicks changed the cluster: ${before} -> ${after}`);
  if (problems.length) fail(problems.join('\n    '));
}

const PAGES = [
  ['overview', '/overview', '[data-testid="overview-nodes"]'],
  ['plugins', '/plugins', '[data-testid="plugin-row-binpack"]'],
  ['preview', '/plugins', null],
  ['config', '/config', '[data-testid="config-save"]'],
  ['inference', '/inference', '[data-testid="inference-gpu-chart"]'],
  ['nodes', '/nodes', '[data-testid="node-row-a100-1"]'],
  ['nodes-vendor', '/nodes?vendor=huawei', '[data-testid="node-row-ascend-1"]'],
  ['tasks', '/tasks', '[data-testid^="task-row-"]'],
  ['jobs', '/jobs', '[data-testid^="job-row-"]'],
  ['queues', '/queues?queue=product', '[data-testid^="queue-waiting-row-"]'],
  ['task-detail', null, '[data-testid="task-events"]'],
];

// A preemptor waits for its victim's process to exit: the urgent fine-tune
// of the demo shows the "waiting" event naming the evicted sweep trial.
export async function checkTaskWaiting(t) {
  const id = t.taskIds['finetune-70b-urgent'];
  const evicted = (await t.api.tasks()).filter((x) => x.name.startsWith('hparam-sweep-') && x.state !== 'running');
  assert(evicted.length === 1, `want one evicted sweep trial, got ${evicted.map((x) => x.name + ' ' + x.state).join(', ')}`);
  await withPage(t, {}, async (page) => {
    await login(page, t.base, t.adminToken);
    await open(page, t.base, `/tasks/${id}`);
    const events = tid(page, 'task-events').first();
    await events.waitFor({ state: 'visible' });
    await waitUntil(async () => /waiting for task \d+ to exit/.test(await events.innerText()), 5000,
      'task-events to show the waiting event');
    const text = await events.innerText();
    assert(text.includes(`waiting for task ${evicted[0].id} to exit`), `task-events do not name the evicted trial ${evicted[0].id}: ${text.slice(0, 400)}`);
  });
}

// Jobs: a gang too large for the cluster waits whole and says why; the page
// shows its members and events, in English and Chinese, and cancels it.
export async function checkJobs(t) {
  const job = await t.api.expect('POST', `${API}/jobs`, {
    name: 'browser-gang',
    roles: [{ name: 'worker', replicas: 3, command: ['sleep', '60'], requests: { gpu: 64 } }],
  }, [201]);
  try {
    await waitUntil(async () => (await t.api.get(`${API}/jobs/${job.id}`)).reason.startsWith('gang 0/3 placeable'),
      8000, 'the job to say why its gang waits');
    await withPage(t, { lang: 'en' }, async (page) => {
      await login(page, t.base, t.adminToken);
      await open(page, t.base, '/jobs');
      assert((await titleText(page)) === 'Jobs', `English title of /jobs is "${await titleText(page)}"`);
      const reason = tid(page, `job-reason-${job.id}`).first();
      await reason.waitFor({ state: 'visible' });
      const text = (await reason.innerText()).trim();
      assert(text.startsWith('gang 0/3 placeable: browser-gang-worker-0'), `job-reason reads "${text}"`);
      await tid(page, `job-row-${job.id}`).first().click();
      await tid(page, `job-detail-${job.id}`).first().waitFor({ state: 'visible' });
      for (const rank of [0, 1, 2]) {
        await tid(page, `job-member-${rank}`).first().waitFor({ state: 'visible' });
      }
      const events = (await tid(page, 'job-events').first().innerText()).trim();
      assert(events.includes('submitted'), `job-events: ${events.slice(0, 300)}`);
      await tid(page, 'lang-toggle').first().click();
      await waitUntil(async () => (await titleText(page)) === '作业', 3000, 'the Jobs title to read 作业');
      const row = (await tid(page, `job-row-${job.id}`).first().innerText()).trim();
      assert(row.includes('等待中'), `the job's row in Chinese: ${row}`);
      await tid(page, 'lang-toggle').first().click();
      await waitUntil(async () => (await titleText(page)) === 'Jobs', 3000, 'the title to read Jobs again');
      await tid(page, `job-cancel-${job.id}`).first().click();
      await waitUntil(async () => (await t.api.get(`${API}/jobs/${job.id}`)).state === 'cancelled', 5000,
        'the cancel button to cancel the job');
      await waitUntil(async () => (await tid(page, `job-row-${job.id}`).first().innerText()).includes('cancelled'),
        5000, 'the row to show the job cancelled');
    });
  } finally {
    await t.api.call('POST', `${API}/jobs/${job.id}/cancel`);
  }
}

// Queues: the demo's two teams. research runs the llama-pretrain group and
// the sweeps on 16 A100s against 12 guaranteed (4 borrowed); product's
// render-h100 waits, and says why, when its row is opened.
export async function checkQueues(t) {
  const list = await t.api.get(`${API}/queues`);
  const research = (list.queues || []).find((q) => q.name === 'research');
  assert(research, `GET /queues has no research queue: ${JSON.stringify(list).slice(0, 300)}`);
  const renderId = t.taskIds['render-h100'];
  assert(renderId !== undefined, 'the demo has no render-h100 task');
  await withPage(t, { lang: 'en' }, async (page) => {
    await login(page, t.base, t.adminToken);
    await tid(page, 'nav-queues').first().click();
    await page.waitForURL((u) => u.pathname === '/queues', { timeout: 8000 });
    await waitUntil(async () => (await titleText(page)) === 'Queues', 3000, 'the page-title to read Queues');
    await tid(page, 'queue-row-research').first().waitFor({ state: 'visible' });
    await tid(page, 'queue-row-product').first().waitFor({ state: 'visible' });
    const bar = tid(page, 'queue-bar-research-A100-80G').first();
    await bar.waitFor({ state: 'visible' });
    // Usage follows the agents' reports: wait until the sweeps and the group run.
    await waitUntil(async () => Number(await bar.getAttribute('data-used')) === 16, 8000,
      'queue-bar-research-A100-80G to show 16 GPUs used');
    const guaranteed = Number(await bar.getAttribute('data-guaranteed'));
    assert(guaranteed === 12, `queue-bar-research-A100-80G data-guaranteed is ${guaranteed}, want 12`);
    const max = await bar.getAttribute('data-max');
    assert(max === '', `queue-bar-research-A100-80G data-max is "${max}", want "" (no max)`);
    const borrowed = tid(page, 'queue-borrowed-research').first();
    const btext = (await borrowed.innerText()).trim();
    assert(btext === '4' && (await borrowed.getAttribute('data-borrowed')) === '4', `queue-borrowed-research shows "${btext}", want 4`);
    const barText = (await bar.innerText()).replace(/\s+/g, ' ');
    assert(barText.includes('4 borrowed'), `the research A100 bar does not say "4 borrowed": ${barText}`);

    await tid(page, 'queue-row-product').first().click();
    const waiting = tid(page, 'queue-waiting').first();
    await waiting.waitFor({ state: 'visible' });
    const row = tid(page, `queue-waiting-row-${renderId}`).first();
    await row.waitFor({ state: 'visible' });
    const cells = (await row.locator('td').allInnerTexts()).map((x) => x.trim());
    assert(cells[2] === 'render-h100', `queue-waiting-row-${renderId} names "${cells[2]}"`);
    assert(/^\d+$/.test(cells[0]), `queue-waiting-row-${renderId}: position "${cells[0]}"`);
    assert(cells[5] && cells[5] !== '—', `render-h100 shows no reason: ${cells.join(' | ')}`);
    const href = await row.locator('a').first().getAttribute('href');
    assert(href === `/tasks/${renderId}`, `render-h100's task link is ${href}`);
    await tid(page, 'queue-events').first().waitFor({ state: 'visible' });
    assert(new URL(page.url()).searchParams.get('queue') === 'product', `the URL does not keep the opened queue: ${page.url()}`);

    // Both languages, with product opened, checked for layout.
    mkdirSync(t.out, { recursive: true });
    const problems = [];
    for (const [lang, title] of [['en', 'Queues'], ['zh', '队列']]) {
      if (lang === 'zh') {
        await tid(page, 'lang-toggle').first().click();
        await waitUntil(async () => (await titleText(page)) === title, 3000, `the page-title to read ${title}`);
        const zhRow = (await tid(page, `queue-waiting-row-${renderId}`).first().innerText()).trim();
        assert(zhRow.includes('render-h100'), `the waiting row in Chinese: ${zhRow}`);
      }
      await sleep(300);
      for (const p of await layoutProblems(page)) problems.push(`${lang}: ${p}`);
      await page.screenshot({ path: path.join(t.out, `${lang}-40-queues-product.png`), fullPage: true });
    }
    await tid(page, 'lang-toggle').first().click();
    if (problems.length) fail(`layout:\n    ${problems.join('\n    ')}`);
    if (page.jsErrors.length) fail(`JavaScript errors: ${[...new Set(page.jsErrors)].slice(0, 3).join(' | ')}`);
  });
}

// What a browser downloads: the login page's scripts and styles within a
// budget (Element Plus and ECharts carry only what the UI uses), and no
// script of any page over the per-file budget.
const FIRST_LOAD_BUDGET_KB = 900;
const FILE_BUDGET_KB = 600;

export async function checkBundle(t) {
  const problems = [];
  await withPage(t, {}, async (page) => {
    const assets = new Map();
    page.on('response', (r) => {
      const u = new URL(r.url());
      if (u.pathname.startsWith('/assets/') && /\.(js|css)$/.test(u.pathname)) {
        assets.set(u.pathname, r.body().then((b) => b.length).catch(() => 0));
      }
    });
    await page.goto(`${t.base}/login`);
    await tid(page, 'login-token').first().waitFor({ state: 'visible' });
    await page.waitForLoadState('load');
    const sizes = async () => Promise.all([...assets].map(async ([p, n]) => [p, await n]));
    const first = await sizes();
    const firstKb = first.reduce((a, [, n]) => a + n, 0) / 1000;
    if (firstKb > FIRST_LOAD_BUDGET_KB) {
      problems.push(`the login page loads ${firstKb.toFixed(0)} kB of scripts and styles, over the ${FIRST_LOAD_BUDGET_KB} kB budget: ` +
        first.sort((a, b) => b[1] - a[1]).map(([p, n]) => `${path.basename(p)} ${(n / 1000).toFixed(0)} kB`).join(', '));
    }
    await login(page, t.base, t.adminToken);
    for (const route of ['/overview', '/plugins', '/config', '/inference', '/nodes', '/tasks', '/jobs', '/queues']) {
      await open(page, t.base, route); // a page shows once its scripts have loaded
    }
    for (const [p, n] of await sizes()) {
      if (p.endsWith('.js') && n / 1000 > FILE_BUDGET_KB) {
        problems.push(`${path.basename(p)} is ${(n / 1000).toFixed(0)} kB, over the ${FILE_BUDGET_KB} kB budget for one script`);
      }
    }
  });
  if (problems.length) fail(problems.join('\n    '));
}

// 8. Screenshots of every page in both languages, each checked for layout.
export async function checkScreenshots(t) {
  mkdirSync(t.out, { recursive: true });
  const problems = [];
  const shoot = async (page, file, opts) => {
    await sleep(500); // let charts and transitions settle
    const p = await layoutProblems(page, opts);
    for (const x of p) problems.push(`${file}: ${x}`);
    await page.screenshot({ path: path.join(t.out, file), fullPage: true });
    if (page.jsErrors.length) problems.push(`${file}: JavaScript errors: ${[...new Set(page.jsErrors)].slice(0, 3).join(' | ')}`);
    page.jsErrors.length = 0;
  };
  for (const lang of ['en', 'zh']) {
    await withPage(t, { lang }, async (page) => {
      await page.goto(`${t.base}/login`);
      await tid(page, 'login-token').first().waitFor({ state: 'visible' });
      await shoot(page, `${lang}-01-login.png`, { needTitle: false });
      await login(page, t.base, t.adminToken);
      const titles = {};
      let i = 2;
      for (const [name, route, ready] of PAGES) {
        const file = `${lang}-${String(i++).padStart(2, '0')}-${name}.png`;
        try {
          if (name === 'preview') {
            await open(page, t.base, '/plugins');
            await runPreview(page, { workload: 'cluster' });
            await tid(page, 'preview-row').first().waitFor({ state: 'visible' });
            for (const p of await drawerHeaderProblems(page)) problems.push(`${file}: ${p}`);
          } else {
            await open(page, t.base, route ?? `/tasks/${t.taskIds['llama-pretrain-0']}`);
            if (ready) await page.locator(ready).first().waitFor({ state: 'visible' });
          }
          if (name === 'nodes-vendor') {
            // The filtered list with the Ascend node's devices opened.
            await tid(page, 'node-expand-ascend-1').first().click();
            await tid(page, 'gpu-vendor-ascend-1-0').first().waitFor({ state: 'visible' });
          }
          titles[name] = await titleText(page);
          if (name === 'inference') {
            await sleep(500);
            for (const p of await chartTextProblems(page)) problems.push(`${file}: ${p}`);
          }
          await shoot(page, file, {});
        } catch (e) {
          problems.push(`${file}: ${e.message.split('\n')[0]}`);
          await page.screenshot({ path: path.join(t.out, file), fullPage: true }).catch(() => {});
          page.jsErrors.length = 0; // this page's errors are not the next page's
        }
      }
      if (lang === 'zh') {
        const want = { overview: '概览', plugins: '插件管理', config: '调度器配置', inference: '推理控制面板', nodes: '节点', 'nodes-vendor': '节点', tasks: '任务', jobs: '作业', queues: '队列' };
        for (const [k, v] of Object.entries(want)) {
          if (titles[k] !== undefined && titles[k] !== v) problems.push(`zh ${k}: page-title "${titles[k]}", want "${v}" (locale zh-CN)`);
        }
      }
    });
    await withPage(t, { lang, width: 420, height: 800 }, async (page) => {
      const file = `${lang}-20-plugins-420.png`;
      try {
        await login(page, t.base, t.adminToken);
        await open(page, t.base, '/plugins');
        await tid(page, 'plugin-row-binpack').first().waitFor({ state: 'visible' });
        if (!(await tid(page, 'nav-menu').first().isVisible())) problems.push(`${file}: no nav-menu button at 420 px`);
        if (await tid(page, 'nav-plugins').first().isVisible()) problems.push(`${file}: the nav links stay visible at 420 px (not collapsed)`);
        await shoot(page, file, {});
      } catch (e) {
        problems.push(`${file}: ${e.message.split('\n')[0]}`);
        await page.screenshot({ path: path.join(t.out, file), fullPage: true }).catch(() => {});
      }
    });
  }
  if (problems.length) fail(`${problems.length} layout problem(s):\n    ${problems.join('\n    ')}`);
}
