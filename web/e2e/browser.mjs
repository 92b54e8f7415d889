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
