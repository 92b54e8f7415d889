// The inference panel's browser check: deploy a model through the dialog
// (real replicas of tests/inference/fake_model.py on the demo's T4 node),
// create an endpoint, use its one-time key from Node, edit the model, have a
// bad form refused at the field, and delete both through the UI; a viewer
// sees every mutating control disabled; screenshots with content in both
// languages. Everything it created is deleted through the API on failure,
// and no replica process of this run is left behind.
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { API, waitUntil } from './harness.mjs';
import {
  assert, chartTextProblems, fail, inputOf, isDisabled, layoutProblems, login, mutating, newPage, open, recordRequests, switchState,
  tid, typeInto, wrapProblems,
} from './browser.mjs';

const MODEL = 'e2e-echo';
const ENDPOINT = 'e2e-chat';

// Replica processes of this run: fake_model.py with a working dir under the run's work dir.
function replicaPids(fake, workDir) {
  const out = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const cmd = readFileSync(`/proc/${d}/cmdline`, 'utf8');
      const cwd = readlinkSync(`/proc/${d}/cwd`);
      if (cmd.includes(fake) && (!workDir || cwd.startsWith(workDir))) out.push(Number(d));
    } catch {
      /* gone or not ours */
    }
  }
  return out;
}

async function confirmBox(page) {
  const ok = page.locator('.el-message-box__btns .el-button--primary').first();
  await ok.waitFor({ state: 'visible', timeout: 4000 });
  await ok.click();
}

async function cleanup(t, fake) {
  await t.api.call('DELETE', `${API}/inference/endpoints/${ENDPOINT}`);
  await t.api.call('DELETE', `${API}/inference/models/${MODEL}`);
  await waitUntil(async () => (await t.api.call('GET', `${API}/inference/models/${MODEL}`)).status === 404, 30000,
    `model ${MODEL} to be gone`).catch(() => {});
  await waitUntil(() => replicaPids(fake, t.workDir).length === 0, 15000, 'the fake_model.py replicas to exit').catch(() => {});
}

export async function checkInference(t) {
  const fake = path.join(t.repo, 'tests', 'inference', 'fake_model.py');
  const problems = [];
  const { context, page } = await newPage(t.browser, { lang: 'en' });
  try {
    await login(page, t.base, t.adminToken);
    await open(page, t.base, '/inference');
    await tid(page, 'inference-gpu-chart').first().waitFor({ state: 'visible' });
    const reqs = recordRequests(page);

    // Deploy through the dialog.
    await tid(page, 'inference-deploy').first().click();
    await tid(page, 'model-form-name').first().waitFor({ state: 'visible' });
    await typeInto(page, 'model-form-name', MODEL);
    await typeInto(page, 'model-form-model', 'test/echo');
    await (await inputOf(page, 'model-form-command')).fill(['python3', fake, '--port', '{port}'].join('\n'));
    await typeInto(page, 'model-form-gpu-memory', '1024');
    // Pick T4 and see it chosen (a tag in the select) before going on: on a
    // busy machine the dropdown may still be opening when the item is clicked.
    const gpuModels = tid(page, 'model-form-gpu-models').first();
    for (let attempt = 0; attempt < 3 && !/\bT4\b/.test(await gpuModels.innerText()); ++attempt) {
      await gpuModels.click();
      const item = page.locator('.el-select-dropdown__item:visible', { hasText: /^\s*T4\s*$/ }).first();
      await item.waitFor({ state: 'visible', timeout: 5000 });
      await item.click();
      await waitUntil(async () => /\bT4\b/.test(await gpuModels.innerText()), 3000, 'T4 to be chosen').catch(() => {});
      await tid(page, 'model-form-name').first().click(); // close the dropdown, not the dialog
    }
    assert(/\bT4\b/.test(await gpuModels.innerText()), 'model-form-gpu-models does not show T4 after choosing it');
    await typeInto(page, 'model-form-cpu', '500');
    await typeInto(page, 'model-form-memory', '512');
    await typeInto(page, 'model-form-min', '1');
    await typeInto(page, 'model-form-max', '1');
    for (const p of await layoutProblems(page, {})) problems.push(`deploy dialog: ${p}`);
    await page.screenshot({ path: path.join(t.out, 'en-31-inference-deploy.png') });
    await tid(page, 'model-form-submit').first().click();
    await tid(page, 'model-form-name').first().waitFor({ state: 'hidden', timeout: 8000 })
      .catch(async () => fail(`the deploy dialog stayed open: ${await page.locator('[data-testid^="model-form-error"]').allInnerTexts()}`));
    const posted = reqs.filter((r) => r.method === 'POST' && r.url.endsWith('/inference/models'));
    assert(posted.length === 1, `want one POST /inference/models, saw ${posted.length}`);
    const spec = await t.api.get(`${API}/inference/models/${MODEL}`);
    assert(spec.requests.gpu_memory_mib === 1024 && JSON.stringify(spec.requests.gpu_models) === '["T4"]' &&
      spec.min_replicas === 1 && spec.max_replicas === 1 && spec.command[1] === fake && spec.command[3] === '{port}',
      `the API holds a different spec: ${JSON.stringify({ requests: spec.requests, command: spec.command, min: spec.min_replicas, max: spec.max_replicas })}`);

    // Running 1/1 in its row (live: the page follows the event stream).
    await tid(page, `model-row-${MODEL}`).first().waitFor({ state: 'visible' });
    await waitUntil(async () => (await tid(page, `model-status-${MODEL}`).first().getAttribute('data-status')) === 'running' &&
      (await tid(page, `model-ready-${MODEL}`).first().innerText()).trim() === '1/1', 60000,
      `the ${MODEL} row to show running 1/1`).catch(async (e) => {
      const m = await t.api.get(`${API}/inference/models/${MODEL}`);
      fail(`${e.message}; the API says ${m.status} (${m.reason}) ${m.ready_replicas}/${m.desired_replicas}`);
    });
    const onT4 = (await t.api.get(`${API}/inference/models/${MODEL}`)).replicas.every((r) => r.node === 't4-1');
    assert(onT4, 'the replica is not on the T4 node');

    // An endpoint with a key, shown once.
    await tid(page, 'endpoint-create').first().click();
    await tid(page, 'endpoint-form-name').first().waitFor({ state: 'visible' });
    await typeInto(page, 'endpoint-form-name', ENDPOINT);
    await tid(page, 'endpoint-form-model').first().click();
    await tid(page, `endpoint-form-model-${MODEL}`).first().click();
    assert((await switchState(page, 'endpoint-form-public')) === false, 'endpoint-form-public is on by default');
    await tid(page, 'endpoint-form-submit').first().click();
    await tid(page, 'endpoint-secret-value').first().waitFor({ state: 'visible' })
      .catch(async () => fail(`no endpoint-secret dialog after create: ${await page.locator('[data-testid^="endpoint-form-error"]').allInnerTexts()}`));
    const secret = await (await inputOf(page, 'endpoint-secret-value')).inputValue();
    assert(/^hfk_/.test(secret), `endpoint-secret-value reads "${secret}"`);
    const curl = await tid(page, 'endpoint-secret-curl').first().innerText();
    assert(curl.includes(`Bearer ${secret}`) && curl.includes('/inference/v1/chat/completions') && curl.includes(`"model":"${ENDPOINT}"`),
      `the curl example lacks the key, route or endpoint: ${curl}`);
    for (const p of await layoutProblems(page, {})) problems.push(`key dialog: ${p}`);
    await page.screenshot({ path: path.join(t.out, 'en-32-inference-key.png') });
    await tid(page, 'endpoint-secret-close').first().click();
    await tid(page, 'endpoint-secret-value').first().waitFor({ state: 'hidden' });
    await tid(page, `endpoint-row-${ENDPOINT}`).first().waitFor({ state: 'visible' });
    assert(!(await page.content()).includes(secret), 'the secret is still in the page after its dialog closed');

    // The key works from outside the browser.
    const res = await fetch(`${t.base}/inference/v1/chat/completions`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${secret}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: ENDPOINT, messages: [{ role: 'user', content: 'ping' }] }),
    });
    const answer = await res.text();
    assert(res.status === 200, `POST /inference/v1/chat/completions with the shown key: ${res.status} ${answer.slice(0, 200)}`);
    await waitUntil(async () => Number((await tid(page, `endpoint-requests-${ENDPOINT}`).first().innerText()).trim()) >= 1, 15000,
      `endpoint-requests-${ENDPOINT} to count the request`);

    // Screenshots with content, both languages.
    const { routes } = await t.api.get(`${API}/inference/endpoints/${ENDPOINT}`);
    assert(Array.isArray(routes) && routes.length, `the API gives no routes for ${ENDPOINT}`);
    for (const lang of ['en', 'zh']) {
      if (lang === 'zh') {
        await tid(page, 'lang-toggle').first().click();
        await waitUntil(async () => (await tid(page, 'page-title').first().innerText()).trim() === '推理控制面板', 4000, 'the Chinese title');
      }
      await tid(page, `model-row-${MODEL}`).first().locator('xpath=ancestor::tr[1]').locator('.el-table__expand-icon').first().click();
      await tid(page, `model-replicas-${MODEL}`).first().waitFor({ state: 'visible' });
      await sleep(500);
      for (const p of await layoutProblems(page, {})) problems.push(`${lang} inference with a model: ${p}`);
      // Routes and column headers stay on one line; the chart's texts inside its box.
      const oneLine = await wrapProblems(page, '[data-testid="inference-endpoints"]', { selector: 'th', texts: routes });
      for (const p of oneLine) problems.push(`${lang} endpoints: ${p}`);
      for (const p of await chartTextProblems(page)) problems.push(`${lang} GPU memory chart: ${p}`);
      await page.screenshot({ path: path.join(t.out, `${lang}-30-inference-live.png`), fullPage: true });
      await tid(page, `model-row-${MODEL}`).first().locator('xpath=ancestor::tr[1]').locator('.el-table__expand-icon').first().click();
    }
    await tid(page, 'lang-toggle').first().click();
    await waitUntil(async () => (await tid(page, 'page-title').first().innerText()).trim() === 'Inference', 4000, 'the English title');

    // A viewer: every mutating control disabled, nothing sent.
    {
      const v = await newPage(t.browser, { lang: 'en' });
      try {
        const vreqs = recordRequests(v.page);
        await login(v.page, t.base, t.viewerToken);
        await open(v.page, t.base, '/inference');
        await tid(v.page, `model-row-${MODEL}`).first().waitFor({ state: 'visible' });
        for (const id of ['inference-deploy', 'endpoint-create', `model-edit-${MODEL}`, `model-delete-${MODEL}`, `endpoint-delete-${ENDPOINT}`]) {
          const el = tid(v.page, id).first();
          if (!(await isDisabled(el))) problems.push(`viewer: ${id} is enabled`);
          await el.click({ force: true, timeout: 1500 }).catch(() => {});
          await v.page.keyboard.press('Escape').catch(() => {});
        }
        await sleep(300);
        const bad = mutating(vreqs);
        if (bad.length) problems.push(`viewer: the page sent ${bad.map((r) => `${r.method} ${new URL(r.url).pathname}`).join(', ')}`);
      } finally {
        await v.context.close();
      }
    }

    // Edit: max 2, autoscaling on.
    await tid(page, `model-edit-${MODEL}`).first().click();
    await tid(page, 'model-form-max').first().waitFor({ state: 'visible' });
    assert((await (await inputOf(page, 'model-form-gpu-memory')).inputValue()) === '1024', 'the edit dialog is not prefilled (GPU memory)');
    await typeInto(page, 'model-form-max', '2');
    if (!(await switchState(page, 'model-form-autoscaling'))) await tid(page, 'model-form-autoscaling').first().click();
    await tid(page, 'model-form-as-target_inflight_per_replica').first().waitFor({ state: 'visible' });
    const n0 = reqs.length;
    await tid(page, 'model-form-submit').first().click();
    await tid(page, 'model-form-max').first().waitFor({ state: 'hidden', timeout: 8000 })
      .catch(async () => fail(`the edit dialog stayed open: ${await page.locator('[data-testid^="model-form-error"]').allInnerTexts()}`));
    const puts = mutating(reqs.slice(n0));
    assert(puts.length === 1 && puts[0].method === 'PUT', `edit sent ${puts.map((r) => r.method).join(', ')}`);
    const edited = await t.api.get(`${API}/inference/models/${MODEL}`);
    assert(edited.max_replicas === 2 && edited.min_replicas === 1 && edited.autoscaling && edited.autoscaling.target_inflight_per_replica > 0,
      `after the edit the API shows min ${edited.min_replicas} max ${edited.max_replicas} autoscaling ${JSON.stringify(edited.autoscaling)}`);
    assert(edited.requests.gpu_memory_mib === 1024 && JSON.stringify(edited.command) === JSON.stringify(spec.command),
      'the edit changed the replica template');
    await waitUntil(async () => /1[–-]2/.test(await tid(page, `model-autoscaling-${MODEL}`).first().innerText()), 5000,
      'the row to show autoscaling 1–2');

    // A bad value: min > max, refused at the field, nothing sent.
    await tid(page, `model-edit-${MODEL}`).first().click();
    await tid(page, 'model-form-min').first().waitFor({ state: 'visible' });
    await typeInto(page, 'model-form-min', '3');
    const n1 = reqs.length;
    await tid(page, 'model-form-submit').first().click();
    await tid(page, 'model-form-error-max_replicas').first().waitFor({ state: 'visible', timeout: 3000 })
      .catch(() => fail('min 3 > max 2 shows no model-form-error-max_replicas'));
    await sleep(300);
    assert(!mutating(reqs.slice(n1)).length, 'min > max was sent to the API');
    const still = await t.api.get(`${API}/inference/models/${MODEL}`);
    assert(still.min_replicas === 1 && still.max_replicas === 2 && still.revision === edited.revision, 'min > max changed the model');

    // A value only the server refuses (a health path over 1024 characters): its 400 at the field.
    await typeInto(page, 'model-form-min', '1');
    await (await inputOf(page, 'model-form-health-path')).fill(`/${'h'.repeat(1100)}`);
    const n2 = reqs.length;
    await tid(page, 'model-form-submit').first().click();
    await tid(page, 'model-form-error-health_path').first().waitFor({ state: 'visible', timeout: 5000 })
      .catch(() => fail('the API\'s 400 for a long health path is not shown at model-form-error-health_path'));
    const apiMsg = (await tid(page, 'model-form-error-health_path').first().innerText()).trim();
    assert(/health_path/.test(apiMsg) && /1024/.test(apiMsg), `model-form-error-health_path reads "${apiMsg}", not the API's message`);
    assert(mutating(reqs.slice(n2)).some((r) => r.method === 'PUT'), 'the long health path was not sent to the API');
    const unchanged = await t.api.get(`${API}/inference/models/${MODEL}`);
    assert(unchanged.revision === edited.revision && unchanged.health_path === edited.health_path, 'the refused PUT changed the model');
    await tid(page, 'model-form-cancel').first().click();
    await tid(page, 'model-form-min').first().waitFor({ state: 'hidden' });

    // Deleting the model while the endpoint routes to it: the API's 422 in place.
    await tid(page, `model-delete-${MODEL}`).first().click();
    await confirmBox(page);
    await tid(page, 'inference-error').first().waitFor({ state: 'visible' })
      .catch(() => fail('deleting a model an endpoint routes to shows no inference-error'));
    const refusal = await tid(page, 'inference-error').first().innerText();
    assert(refusal.includes(ENDPOINT), `inference-error does not name the endpoint: ${refusal}`);
    assert((await t.api.call('GET', `${API}/inference/models/${MODEL}`)).status === 200, 'the refused delete removed the model');

    // Delete the endpoint, then the model, through the UI.
    await tid(page, `endpoint-delete-${ENDPOINT}`).first().click();
    await confirmBox(page);
    await waitUntil(async () => (await t.api.call('GET', `${API}/inference/endpoints/${ENDPOINT}`)).status === 404, 5000, 'the endpoint to be deleted');
    await tid(page, `endpoint-row-${ENDPOINT}`).first().waitFor({ state: 'detached', timeout: 5000 });
    await tid(page, `model-delete-${MODEL}`).first().click();
    await confirmBox(page);
    await waitUntil(async () => (await t.api.call('GET', `${API}/inference/models/${MODEL}`)).status === 404, 30000, 'the model to be deleted');
    await tid(page, `model-row-${MODEL}`).first().waitFor({ state: 'detached', timeout: 8000 });
    await waitUntil(() => replicaPids(fake, t.workDir).length === 0, 15000, 'the replica process to exit');
    // The refused delete's 422 is logged by the browser as a failed resource load: expected.
    const errs = page.jsErrors.filter((e) => !/Failed to load resource/.test(e));
    if (errs.length) problems.push(`JavaScript errors: ${[...new Set(errs)].slice(0, 3).join(' | ')}`);
  } finally {
    await context.close();
    await cleanup(t, fake);
  }
  if (problems.length) fail(problems.join('\n    '));
}
