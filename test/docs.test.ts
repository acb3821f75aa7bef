import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { TestGateway, cleanupPrefix, uniquePrefix } from './helpers/harness.js';

/**
 * The README and docs/ are the whole manual: a reader who cloned the repository needs nothing
 * else. Every operation the gateway serves is in the API reference, every docs page is in the
 * index, every relative link leads to a file, and nothing points outside the repository.
 */

const ROOT = path.resolve(import.meta.dirname, '..');
const DOCS = path.join(ROOT, 'docs');
const docFiles = () => readdirSync(DOCS).filter((f) => f.endsWith('.md'));
const manual = () => [path.join(ROOT, 'README.md'), ...docFiles().map((f) => path.join(DOCS, f))];
const read = (file: string) => readFileSync(file, 'utf8');

/** Markdown links `[text](target)` outside code spans and blocks, with their line numbers. */
function links(text: string): Array<{ target: string; line: number }> {
  const found: Array<{ target: string; line: number }> = [];
  let fenced = false;
  text.split('\n').forEach((line, i) => {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    if (fenced) return;
    const prose = line.replace(/`[^`]*`/g, '');
    for (const m of prose.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) found.push({ target: m[1], line: i + 1 });
  });
  return found;
}

describe('documentation', () => {
  it('never sends the reader outside the repository for the contract', () => {
    for (const file of manual()) {
      const text = read(file);
      for (const banned of ['../shared', 'SPEC.md', 'CONTRACT.md']) {
        assert.ok(!text.includes(banned), `${path.relative(ROOT, file)} mentions ${banned}`);
      }
    }
  });

  it('has relative links that all lead to existing files and headings', () => {
    for (const file of manual()) {
      for (const { target, line } of links(read(file))) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto: ...
        const [pathPart, anchor] = target.split('#');
        const dest = pathPart ? path.resolve(path.dirname(file), decodeURI(pathPart)) : file;
        const where = `${path.relative(ROOT, file)}:${line} -> ${target}`;
        assert.ok(existsSync(dest), `${where}: no such file`);
        if (anchor && dest.endsWith('.md')) {
          // GitHub's heading ids: lower case, punctuation dropped, spaces to hyphens.
          const ids = read(dest)
            .split('\n')
            .filter((l) => /^#{1,6}\s/.test(l))
            .map((l) => l.replace(/^#+\s+/, '').trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-'));
          assert.ok(ids.includes(anchor), `${where}: no heading with that id`);
        }
      }
    }
  });

  it('lists every page of docs/ in its index, docs/README.md', () => {
    const index = read(path.join(DOCS, 'README.md'));
    const listed = new Set(links(index).map((l) => l.target.split('#')[0]));
    for (const page of docFiles().filter((f) => f !== 'README.md')) assert.ok(listed.has(page), `docs/README.md does not link ${page}`);
  });

  describe('the API reference, docs/api.md', () => {
    const prefix = uniquePrefix('docs');
    let gw: TestGateway;
    before(async () => {
      gw = await new TestGateway(prefix).start();
    });
    after(async () => {
      await gw?.stop();
      await cleanupPrefix(prefix);
    });

    it('names every operation of the served OpenAPI document', async () => {
      const doc = (await gw.request('GET', '/v1/openapi.json')).body as { paths: Record<string, Record<string, unknown>> };
      const reference = read(path.join(DOCS, 'api.md'));
      const operations = Object.entries(doc.paths).flatMap(([p, item]) =>
        Object.keys(item)
          .filter((m) => ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'].includes(m))
          .map((m) => `\`${m.toUpperCase()} ${p}\``),
      );
      assert.ok(operations.length > 20, `only ${operations.length} operations in the document`);
      const missing = operations.filter((op) => !reference.includes(op));
      assert.deepEqual(missing, [], 'operations the reference does not name');
    });

    it('names every error code the gateway can answer with', async () => {
      const { ERROR_STATUS } = await import('../models/errors.js');
      const reference = read(path.join(DOCS, 'api.md'));
      const missing = Object.keys(ERROR_STATUS).filter((code) => !reference.includes(`\`${code}\``));
      assert.deepEqual(missing, [], 'error codes the reference does not name');
    });
  });
});
