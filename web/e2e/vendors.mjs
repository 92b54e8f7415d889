// The vendors of the cluster's accelerators on the Nodes page and in task
// requests: each node's vendors (the demo's Huawei Ascend node, the NVIDIA
// A100 nodes, nothing on the CPU-only node), the vendor filter kept in the
// URL across a reload, each device's vendor and fabric domain in a node's
// device table, the demo's ascend-embed task asking gpu_vendors [huawei], and
// the same in Chinese, checked for layout.
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { waitUntil } from './harness.mjs';
import { assert, fail, layoutProblems, login, newPage, open, tid, titleText } from './browser.mjs';

const ASCEND = 'ascend-1';
const LABELS = {
  en: { huawei: 'Huawei Ascend', nvidia: 'NVIDIA', all: 'All vendors', title: 'Nodes', fabric: 'Fabric' },
  zh: { huawei: '华为昇腾', nvidia: 'NVIDIA', all: '全部厂商', title: '节点', fabric: '互联域' },
};

const text = async (loc) => (await loc.innerText()).trim().replace(/\s+/g, ' ');

async function shownNodes(page) {
  return page.locator('[data-testid^="node-row-"]').evaluateAll((els) => els.map((e) => e.getAttribute('data-testid').slice('node-row-'.length)));
}

async function chooseVendor(page, vendor) {
  await tid(page, 'node-filter-vendor').first().click();
  const option = tid(page, `node-filter-vendor-${vendor}`).first();
  await option.waitFor({ state: 'visible' }).catch(() => fail(`the vendor filter offers no node-filter-vendor-${vendor}`));
  await option.click();
}

// What a node's vendor cell and its devices' vendor cells say, in `lang`.
async function vendorCells(page, nodes, lang) {
  const L = LABELS[lang];
  const want = { [ASCEND]: L.huawei, 'a100-1': L.nvidia, 'cpu-1': '' };
  for (const [node, label] of Object.entries(want)) {
    if (!nodes.includes(node)) continue;
    const cell = tid(page, `node-vendor-${node}`).first();
    await cell.waitFor({ state: 'attached' }).catch(() => fail(`${lang}: no node-vendor-${node}`));
    const shown = await text(cell);
    assert(shown === label, `${lang}: node-vendor-${node} reads "${shown}", want "${label}"`);
  }
}

async function deviceCells(page, nodeView, lang) {
  const L = LABELS[lang];
  await tid(page, `node-expand-${ASCEND}`).first().click();
  for (const g of nodeView.gpus) {
    const cell = tid(page, `gpu-vendor-${ASCEND}-${g.index}`).first();
    await cell.waitFor({ state: 'visible' }).catch(() => fail(`${lang}: the device table of ${ASCEND} has no gpu-vendor-${ASCEND}-${g.index}`));
    const shown = await text(cell);
    assert(shown === L.huawei, `${lang}: gpu-vendor-${ASCEND}-${g.index} reads "${shown}", want "${L.huawei}"`);
    const raw = await cell.getAttribute('data-vendor');
    assert(raw === 'huawei', `${lang}: gpu-vendor-${ASCEND}-${g.index} has data-vendor "${raw}"`);
    const fabric = await text(tid(page, `gpu-fabric-${ASCEND}-${g.index}`).first());
    assert(fabric === String(g.fabric_domain), `${lang}: gpu-fabric-${ASCEND}-${g.index} reads "${fabric}", the API says ${g.fabric_domain}`);
  }
  const heads = await page.locator(`[data-testid="gpu-vendor-${ASCEND}-0"]`).first()
    .evaluate((e) => [...e.closest('table').querySelectorAll('thead th')].map((th) => th.innerText.trim()));
  assert(heads.includes(L.fabric), `${lang}: the device table's columns are ${heads.join(' | ')}, no "${L.fabric}"`);
  assert(!heads.includes('NVLink'), `${lang}: the device table still calls the fabric domain NVLink`);
}

export async function checkVendors(t) {
  const nodes = await t.api.nodes();
  const ascend = nodes.find((n) => n.name === ASCEND);
  assert(ascend && ascend.gpus.length === 4 && ascend.gpus.every((g) => g.vendor === 'huawei'),
    `the API does not show ${ASCEND} with four huawei devices: ${JSON.stringify(ascend).slice(0, 300)}`);
  const embedId = t.taskIds['ascend-embed'];
  assert(embedId !== undefined, 'the demo has no ascend-embed task');
  mkdirSync(t.out, { recursive: true });
  const problems = [];

  await withPage(t, 'en', async (page) => {
    await login(page, t.base, t.adminToken);
    await open(page, t.base, '/nodes');
    await tid(page, `node-row-${ASCEND}`).first().waitFor({ state: 'visible' });
    const all = await shownNodes(page);
    assert(all.length === nodes.length, `the nodes table shows ${all.join(', ')}; the API has ${nodes.length} nodes`);
    await vendorCells(page, all, 'en');
    const raw = await tid(page, `node-vendor-${ASCEND}`).first().getAttribute('data-vendors');
    assert(raw === 'huawei', `node-vendor-${ASCEND} has data-vendors "${raw}"`);

    // The filter: exactly the Ascend node, kept in the URL and over a reload.
    await chooseVendor(page, 'huawei');
    await waitUntil(async () => (await shownNodes(page)).join() === ASCEND, 3000, `the huawei filter to show ${ASCEND} only`)
      .catch(async () => fail(`with vendor huawei the table shows ${(await shownNodes(page)).join(', ')}`));
    await waitUntil(async () => new URL(page.url()).searchParams.get('vendor') === 'huawei', 3000, 'the URL to carry ?vendor=huawei')
      .catch(() => fail(`the URL does not keep the vendor filter: ${page.url()}`));
    await page.reload();
    await tid(page, `node-row-${ASCEND}`).first().waitFor({ state: 'visible' });
    const afterReload = await shownNodes(page);
    assert(afterReload.join() === ASCEND, `after a reload of ${page.url()} the table shows ${afterReload.join(', ')}`);
    const chosen = await text(tid(page, 'node-filter-vendor').first());
    assert(chosen.includes(LABELS.en.huawei), `after a reload node-filter-vendor reads "${chosen}"`);
    await deviceCells(page, ascend, 'en');
    for (const p of await layoutProblems(page)) problems.push(`en nodes: ${p}`);
    await page.screenshot({ path: path.join(t.out, 'en-50-nodes-vendor.png'), fullPage: true });

    // A task's requests name its vendors, in the list and in its detail.
    await open(page, t.base, '/tasks');
    const row = tid(page, `task-row-${embedId}`).first();
    await row.waitFor({ state: 'visible' });
    assert((await text(row)).includes(LABELS.en.huawei), `the ascend-embed row does not name Huawei Ascend: ${await text(row)}`);
    await open(page, t.base, `/tasks/${embedId}`);
    await tid(page, 'task-events').first().waitFor({ state: 'visible' });
    const request = await text(tid(page, 'task-request').first());
    assert(request.includes(LABELS.en.huawei), `task-request of ascend-embed reads "${request}"`);

    // Back to every vendor.
    await open(page, t.base, '/nodes?vendor=huawei');
    await chooseVendor(page, 'all');
    await waitUntil(async () => (await shownNodes(page)).length === nodes.length, 3000, 'the "all" choice to show every node');
    assert(!new URL(page.url()).searchParams.has('vendor'), `with all vendors the URL still has a vendor: ${page.url()}`);
    if (page.jsErrors.length) fail(`JavaScript errors: ${[...new Set(page.jsErrors)].slice(0, 3).join(' | ')}`);
  });

  // Chinese: the cells and the filter's label, with the filter from the URL.
  await withPage(t, 'zh', async (page) => {
    await login(page, t.base, t.adminToken);
    await open(page, t.base, '/nodes');
    await waitUntil(async () => (await titleText(page)) === LABELS.zh.title, 3000, `the page-title to read ${LABELS.zh.title}`);
    await tid(page, `node-row-${ASCEND}`).first().waitFor({ state: 'visible' });
    await vendorCells(page, await shownNodes(page), 'zh');
    await open(page, t.base, '/nodes?vendor=huawei');
    await tid(page, `node-row-${ASCEND}`).first().waitFor({ state: 'visible' });
    const shown = await shownNodes(page);
    assert(shown.join() === ASCEND, `zh: /nodes?vendor=huawei shows ${shown.join(', ')}`);
    const chosen = await text(tid(page, 'node-filter-vendor').first());
    assert(chosen.includes(LABELS.zh.huawei), `zh: node-filter-vendor reads "${chosen}", want "${LABELS.zh.huawei}"`);
    await deviceCells(page, ascend, 'zh');
    await sleep(300);
    for (const p of await layoutProblems(page)) problems.push(`zh nodes: ${p}`);
    await page.screenshot({ path: path.join(t.out, 'zh-50-nodes-vendor.png'), fullPage: true });
    await tid(page, 'node-filter-vendor').first().click();
    const allOption = await text(tid(page, 'node-filter-vendor-all').first());
    assert(allOption === LABELS.zh.all, `zh: node-filter-vendor-all reads "${allOption}", want "${LABELS.zh.all}"`);
    if (page.jsErrors.length) fail(`JavaScript errors: ${[...new Set(page.jsErrors)].slice(0, 3).join(' | ')}`);
  });
  if (problems.length) fail(`layout:\n    ${problems.join('\n    ')}`);
}

async function withPage(t, lang, fn) {
  const { context, page } = await newPage(t.browser, { lang });
  try {
    return await fn(page);
  } finally {
    await context.close();
  }
}
