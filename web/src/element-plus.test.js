import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { components } from './element-plus.js';

const src = path.dirname(fileURLToPath(import.meta.url));

function vueFiles(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return vueFiles(p);
    return e.name.endsWith('.vue') ? [p] : [];
  });
}

// <el-table-column> is ElTableColumn.
const componentName = (tag) => tag.replace(/(^|-)([a-z])/g, (_, __, c) => c.toUpperCase());

describe('element-plus registration', () => {
  it('registers every Element Plus component a template uses', () => {
    const registered = new Set(components.map((c) => c.name));
    const missing = new Set();
    for (const file of vueFiles(src)) {
      const template = readFileSync(file, 'utf8').split('<script')[0];
      for (const [, tag] of template.matchAll(/<(el-[a-z-]+)/g)) {
        if (!registered.has(componentName(tag))) missing.add(`${tag} (${path.relative(src, file)})`);
      }
    }
    expect([...missing]).toEqual([]);
  });

  it('names each component as its tag resolves', () => {
    expect(componentName('el-table-column')).toBe('ElTableColumn');
    for (const c of components) expect(c.name).toMatch(/^El[A-Z]\w+$/);
  });
});
