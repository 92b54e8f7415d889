// Page-level helpers shared by the checks: logging in through the login page,
// reading Element Plus controls through the data-testids of the UI contract
// (listed in web/e2e/README.md), recording the requests a
// page makes, and the layout sanity checks run on every screenshot.

export class CheckFailure extends Error {}

export function fail(msg) {
  throw new CheckFailure(msg);
}

export function assert(cond, msg) {
  if (!cond) fail(msg);
}

export const tid = (page, id) => page.locator(`[data-testid="${id}"]`);

/** Contract deviations that do not fail a check by themselves; reported at the end. */
export const notes = new Set();

/** A new context (own sessionStorage/localStorage) and page. */
export async function newPage(browser, { lang = 'en', width = 1280, height = 800 } = {}) {
  const context = await browser.newContext({
    viewport: { width, height },
    locale: lang === 'zh' ? 'zh-CN' : 'en-US',
  });
  context.setDefaultTimeout(8000);
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e && e.message ? e.message : e)));
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(m.text());
  });
  page.jsErrors = errors;
  return { context, page };
}

/** Every request the page sends, as {method, url, body}. */
export function recordRequests(page) {
  const seen = [];
  page.on('request', (r) => seen.push({ method: r.method(), url: r.url(), body: r.postData() || '' }));
  return seen;
}

export const mutating = (reqs) => reqs.filter((r) => ['PUT', 'POST', 'DELETE', 'PATCH'].includes(r.method));

/** The <input> of an el-input / el-input-number (or the element itself). */
export async function inputOf(page, id) {
  const el = tid(page, id).first();
  await el.waitFor({ state: 'attached' });
  const tag = await el.evaluate((e) => e.tagName.toLowerCase());
  if (tag === 'input' || tag === 'textarea') return el;
  return el.locator('input, textarea').first();
}

/**
 * Types `value` into the field (select all, type, then Tab so that
 * blur-triggered saves fire). Returns false when the browser refuses the text
 * (a type=number input does not take "abc").
 */
export async function typeInto(page, id, value, { blur = true } = {}) {
  const input = await inputOf(page, id);
  await input.click();
  await input.press('Control+A');
  await input.press('Delete');
  try {
    await input.pressSequentially(String(value));
  } catch {
    return false;
  }
  if (blur) await input.press('Tab');
  return true;
}

export async function valueOf(page, id) {
  return (await inputOf(page, id)).inputValue();
}

/** aria-checked of an el-switch, from the element itself (the contract) or a child. */
export async function switchState(page, id) {
  const el = tid(page, id).first();
  await el.waitFor({ state: 'visible' });
  const info = await el.evaluate((e) => {
    const own = e.getAttribute('aria-checked');
    const child = e.querySelector('[aria-checked]');
    const cls = e.classList.contains('is-checked') || !!e.closest('.el-switch.is-checked');
    return { own, child: child ? child.getAttribute('aria-checked') : null, cls };
  });
  if (info.own === null) {
    notes.add(`${id}: aria-checked is not on the element with the data-testid (contract: "the element with the id must be the clickable switch, with aria-checked")`);
  }
  const v = info.own ?? info.child;
  if (v === 'true') return true;
  if (v === 'false') return false;
  return info.cls;
}

/** The contract's "disabled": a disabled attribute or is-disabled class, on the control or its el wrapper. */
export async function isDisabled(locator) {
  return locator.evaluate((e) => {
    const hit = (n) => !!n && (n.hasAttribute('disabled') || n.getAttribute('aria-disabled') === 'true' || n.classList.contains('is-disabled'));
    if (hit(e)) return true;
    const wrap = e.closest('.el-switch, .el-input, .el-input-number, .el-select, .el-button, .el-textarea');
    if (hit(wrap)) return true;
    const inner = e.querySelector('input, button, textarea, .el-select__wrapper');
    return hit(inner);
  });
}

/** Logs in through the login page with `token`; resolves once the shell shows. */
export async function login(page, base, token, { expectOk = true } = {}) {
  await page.goto(`${base}/login`);
  await typeInto(page, 'login-token', token, { blur: false });
  await tid(page, 'login-submit').first().click();
  if (expectOk) {
    await tid(page, 'page-title').first().waitFor({ state: 'visible' });
    await page.waitForURL((u) => !u.pathname.startsWith('/login'), { timeout: 8000 });
  }
}

/** Opens a route through the address bar (a full load: the token must survive in sessionStorage). */
export async function open(page, base, route) {
  await page.goto(base + route);
  await tid(page, 'page-title').first().waitFor({ state: 'visible' });
}

/** Text of a visible page-title, trimmed. */
export async function titleText(page) {
  return (await tid(page, 'page-title').first().innerText()).trim();
}

/**
 * Layout sanity of the current page: no horizontal scrollbar, page-title
 * visible, no heading/button/tag whose text overflows its box. Returns a list
 * of problems (empty when fine).
 */
export async function layoutProblems(page, { needTitle = true } = {}) {
  return page.evaluate((needTitle) => {
    const problems = [];
    const se = document.scrollingElement || document.documentElement;
    if (se.scrollWidth > window.innerWidth) {
      problems.push(`horizontal scroll: scrollWidth ${se.scrollWidth} > innerWidth ${window.innerWidth}`);
    }
    const title = document.querySelector('[data-testid="page-title"]');
    if (needTitle) {
      const r = title && title.getBoundingClientRect();
      if (!title || !r.width || !r.height || getComputedStyle(title).visibility === 'hidden') problems.push('page-title not visible');
    }
    const sel = 'h1, h2, h3, h4, button, .el-button, .el-tag, .el-menu-item, .el-select__placeholder, .el-select__selected-item, [data-testid="page-title"], [data-testid^="plugin-status-"], [data-testid^="node-condition-"]';
    const seen = new Set();
    for (const e of document.querySelectorAll(sel)) {
      if (seen.has(e)) continue;
      seen.add(e);
      const r = e.getBoundingClientRect();
      if (!r.width || !r.height) continue; // hidden
      const cs = getComputedStyle(e);
      if (cs.visibility === 'hidden' || cs.display === 'none') continue;
      const text = (e.innerText || '').trim().replace(/\s+/g, ' ');
      if (!text) continue;
      const over = e.scrollWidth > e.clientWidth + 1 || e.scrollHeight > e.clientHeight + 2;
      // Text clipped with an ellipsis is overflow too, as far as a reader is concerned.
      if (over && cs.overflow !== 'visible' && cs.overflowX !== 'auto' && cs.overflowX !== 'scroll') {
        const id = e.getAttribute('data-testid') || e.className || e.tagName;
        problems.push(`text overflows its box: <${e.tagName.toLowerCase()} ${String(id).slice(0, 60)}> "${text.slice(0, 40)}" (${e.scrollWidth}x${e.scrollHeight} in ${e.clientWidth}x${e.clientHeight})`);
      } else if (over && cs.overflow === 'visible') {
        const id = e.getAttribute('data-testid') || e.className || e.tagName;
        problems.push(`text spills out of its box: <${e.tagName.toLowerCase()} ${String(id).slice(0, 60)}> "${text.slice(0, 40)}" (${e.scrollWidth}x${e.scrollHeight} in ${e.clientWidth}x${e.clientHeight})`);
      }
    }
    // The side nav (the <aside> holding the nav links) runs down to the
    // bottom of the document, however long the page, and its links stay in
    // view when the page is scrolled to the bottom.
    const side = document.querySelector('[data-testid="nav-overview"]')?.closest('aside');
    if (side && getComputedStyle(side).display !== 'none' && side.getBoundingClientRect().width) {
      const x0 = window.scrollX;
      const y0 = window.scrollY;
      window.scrollTo(0, 0);
      const bottom = side.getBoundingClientRect().bottom + window.scrollY;
      if (bottom < se.scrollHeight - 1) {
        problems.push(`the side nav ends at ${Math.round(bottom)} px, ${Math.round(se.scrollHeight - bottom)} px above the bottom of the page (${se.scrollHeight} px)`);
      }
      window.scrollTo(0, se.scrollHeight);
      const link = document.querySelector('[data-testid="nav-overview"]').getBoundingClientRect();
      if (link.top < 0 || link.bottom > window.innerHeight) problems.push('the nav links scroll out of view at the bottom of the page');
      window.scrollTo(x0, y0);
    }
    // At desktop width nothing should hide behind a sideways scroll inside
    // the page either (a table whose last columns are cut off by its card).
    if (window.innerWidth >= 1000) {
      for (const e of document.querySelectorAll('main *, .main *, .el-drawer *, .el-dialog *')) {
        const cs = getComputedStyle(e);
        if (!['auto', 'scroll', 'hidden'].includes(cs.overflowX)) continue;
        if (e.scrollWidth <= e.clientWidth + 1 || !e.clientWidth) continue;
        if (e.closest('[_echarts_instance_], .el-select-dropdown, .el-popper, .el-tooltip__popper, .el-table__header-wrapper')) continue;
        if (cs.textOverflow === 'ellipsis' || cs.whiteSpace === 'nowrap' && !e.children.length) continue;
        const r = e.getBoundingClientRect();
        if (!r.width || !r.height) continue;
        const id = e.getAttribute('data-testid') || (typeof e.className === 'string' ? e.className : '') || e.tagName;
        problems.push(`content cut off sideways in <${e.tagName.toLowerCase()} ${String(id).slice(0, 60)}> (${e.scrollWidth} px of content in ${e.clientWidth} px, overflow-x ${cs.overflowX})`);
      }
    }
    return problems;
  }, needTitle);
}

/**
 * The open preview drawer sits below the shell's header: its title box does
 * not intersect the header's box, and the header is not covered (the point at
 * the centre of the language toggle belongs to the header). Returns problems.
 */
export async function drawerHeaderProblems(page) {
  return page.evaluate(() => {
    const problems = [];
    const toggle = document.querySelector('[data-testid="lang-toggle"]');
    const header = toggle && toggle.closest('header');
    const panel = document.querySelector('[data-testid="preview-panel"]');
    const title = panel && panel.closest('.el-drawer') && panel.closest('.el-drawer').querySelector('.el-drawer__header');
    if (!header) return ['no page header (the <header> holding lang-toggle)'];
    if (!title) return ['no title in the preview drawer (.el-drawer__header)'];
    const a = title.getBoundingClientRect();
    const b = header.getBoundingClientRect();
    const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
    const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
    const box = (r) => `${Math.round(r.left)},${Math.round(r.top)} ${Math.round(r.width)}x${Math.round(r.height)}`;
    if (w > 0 && h > 0) problems.push(`the preview drawer's title (${box(a)}) overlaps the page header (${box(b)})`);
    const t = toggle.getBoundingClientRect();
    const hit = document.elementFromPoint(t.left + t.width / 2, t.top + t.height / 2);
    if (!hit || !header.contains(hit)) {
      problems.push(`the page header is covered while the preview drawer is open (at lang-toggle: <${hit ? hit.tagName.toLowerCase() + ' ' + String(hit.className).slice(0, 40) : 'nothing'}>)`);
    }
    return problems;
  });
}

/**
 * Every text the GPU memory chart draws (its SVG <text>: axis names and
 * labels, legend) lies inside the chart's box, the GiB axis name among them.
 * Returns problems.
 */
export async function chartTextProblems(page) {
  return page.evaluate(() => {
    const problems = [];
    const host = document.querySelector('[data-testid="inference-gpu-chart"] [_echarts_instance_]');
    if (!host) return ['no chart in inference-gpu-chart'];
    const box = host.getBoundingClientRect();
    if (!box.width || !box.height) return problems; // no GPUs: no chart
    const texts = [...host.querySelectorAll('svg text')].filter((e) => e.textContent.trim());
    if (!texts.some((e) => e.textContent.trim() === 'GiB')) {
      problems.push(`the chart draws no "GiB" axis name as SVG text (${texts.length} texts)`);
    }
    for (const e of texts) {
      const cs = getComputedStyle(e);
      if (cs.display === 'none' || cs.visibility === 'hidden' || Number(e.getAttribute('opacity') ?? 1) === 0) continue;
      const r = e.getBoundingClientRect();
      if (r.left < box.left - 0.5 || r.right > box.right + 0.5 || r.top < box.top - 0.5 || r.bottom > box.bottom + 0.5) {
        problems.push(`chart text "${e.textContent.trim().slice(0, 30)}" at ${Math.round(r.left - box.left)},${Math.round(r.top - box.top)} ` +
          `${Math.round(r.width)}x${Math.round(r.height)} is cut off by the chart's ${Math.round(box.width)}x${Math.round(box.height)} box`);
      }
    }
    return problems;
  });
}

/**
 * Text that must stay on one line, inside the element `root` (a CSS
 * selector): each element matched by `selector` that has text, and the
 * innermost element whose whole text is each of `texts` (each must be found).
 * Lines are counted from the text's own boxes: fragments whose vertical
 * centres differ by more than half a line are on separate lines. Returns
 * problems.
 */
export async function wrapProblems(page, root, { selector = null, texts = [] } = {}) {
  return page.evaluate(({ root, selector, texts }) => {
    const problems = [];
    const top = document.querySelector(root);
    if (!top) return [`no ${root}`];
    const norm = (x) => x.trim().replace(/\s+/g, ' ');
    // The boxes of an element's text, grouped into lines.
    const textLines = (el) => {
      const found = [];
      const walk = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
      for (let n = walk.nextNode(); n; n = walk.nextNode()) {
        if (!n.textContent.trim()) continue;
        const range = document.createRange();
        range.selectNodeContents(n);
        for (const r of range.getClientRects()) {
          if (!r.width || !r.height) continue;
          const c = r.top + r.height / 2;
          const line = found.find((l) => Math.abs(l.c - c) < Math.min(l.h, r.height) / 2);
          if (line) {
            line.left = Math.min(line.left, r.left);
            line.right = Math.max(line.right, r.right);
          } else {
            found.push({ c, h: r.height, left: r.left, right: r.right });
          }
        }
      }
      return found;
    };
    const els = selector ? [...top.querySelectorAll(selector)].filter((e) => norm(e.textContent) && e.getClientRects().length) : [];
    for (const text of texts) {
      const hits = [...top.querySelectorAll('*')].filter((e) => norm(e.textContent) === text &&
        ![...e.children].some((c) => norm(c.textContent) === text));
      if (!hits.length) problems.push(`"${text}" is not shown in ${root}`);
      els.push(...hits);
    }
    for (const e of els) {
      const lines = textLines(e);
      const text = norm(e.textContent).slice(0, 60);
      if (lines.length > 1) problems.push(`"${text}" wraps onto ${lines.length} lines`);
      // Kept on one line by being cut off is no better: the text must lie
      // inside every box between it and the root that clips or scrolls.
      const left = Math.min(...lines.map((l) => l.left));
      const right = Math.max(...lines.map((l) => l.right));
      for (let a = e; a; a = a.parentElement) {
        const ar = a.getBoundingClientRect();
        if ((getComputedStyle(a).overflowX !== 'visible' || a === top) && (left < ar.left - 0.5 || right > ar.right + 0.5)) {
          problems.push(`"${text}" is cut off by <${a.tagName.toLowerCase()} ${String(a.className).slice(0, 40)}>`);
          break;
        }
        if (a === top) break;
      }
    }
    return problems;
  }, { root, selector, texts });
}
