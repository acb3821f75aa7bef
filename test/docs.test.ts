import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { TestGateway, cleanupPrefix, uniquePrefix } from './helpers/harness.js';

/**
 * The README and docs/ are the whole manual: a reader who cloned the repository needs nothing
 * else. Every operation the gateway serves is in the API reference, every docs page is in the
 * index, every relative link leads to a file, and nothing points outside the repository. The
 * index and the README name every benchmark and every engine there is, so a new one cannot be
 * left out of them.
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
  it("shows the console in the README's quick start with one small committed screenshot", () => {
    const readme = read(path.join(ROOT, 'README.md'));
    const quickStart = readme.slice(readme.indexOf('## Quick start'), readme.indexOf('\n## ', readme.indexOf('## Quick start') + 1));
    const images = [...quickStart.matchAll(/!\[[^\]]+\]\(([^)]+)\)/g)].map((m) => m[1]);
    assert.deepEqual(images, ['docs/console.png']);
    assert.match(quickStart, /Console/);
    const png = readFileSync(path.join(ROOT, images[0]));
    assert.deepEqual([...png.subarray(1, 4)], [0x50, 0x4e, 0x47], 'a PNG');
    assert.ok(png.length < 200_000, `${images[0]} is ${png.length} bytes: keep the checkout small`);
  });

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

  it('lists every page of docs/ in its index, docs/README.md, and no other', () => {
    const index = read(path.join(DOCS, 'README.md'));
    const listed = new Set(links(index).map((l) => l.target.split('#')[0]));
    const pages = docFiles().filter((f) => f !== 'README.md');
    for (const page of pages) assert.ok(listed.has(page), `docs/README.md does not link ${page}`);
    for (const page of listed) assert.ok(pages.includes(page), `docs/README.md links ${page}, which is not a page of docs/`);
  });

  describe('what the index and the README say the pages and folders hold', () => {
    /** The line of `file` that starts with `start` (a list item), which must be there once. */
    const itemOf = (file: string, start: string) => {
      const found = read(file).split('\n').filter((l) => l.startsWith(start));
      assert.equal(found.length, 1, `${path.relative(ROOT, file)}: expected one line starting ${start}`);
      return found[0];
    };
    // What `npm run bench -- <name>` accepts: bench/run.ts takes every .ts file beside it but itself.
    const benchmarks = readdirSync(path.join(ROOT, 'bench'))
      .filter((f) => f.endsWith('.ts') && f !== 'run.ts')
      .map((f) => f.slice(0, -3));
    const engines = readdirSync(path.join(ROOT, 'sdk/engines'), { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => e.name);

    it('names every benchmark of `npm run bench` in the index, the README and docs/benchmarks.md', () => {
      assert.ok(benchmarks.length > 0, 'no benchmark found in bench/');
      const named = (line: string, name: string) => new RegExp(`[\\s\`]${name}\``).test(line);
      const index = itemOf(path.join(DOCS, 'README.md'), '- [benchmarks.md](benchmarks.md)');
      const readme = itemOf(path.join(ROOT, 'README.md'), '- `bench/`');
      const page = read(path.join(DOCS, 'benchmarks.md'));
      for (const name of benchmarks) {
        assert.ok(named(index, name), `docs/README.md's line for benchmarks.md does not name the benchmark \`${name}\``);
        assert.ok(named(readme, name), `README.md's \`bench/\` line does not name the benchmark \`${name}\``);
        assert.ok(page.includes(`npm run bench -- ${name}`), `docs/benchmarks.md does not show \`npm run bench -- ${name}\``);
      }
    });

    it('names every engine of sdk/engines/ in the README, the index and docs/engines.md', () => {
      assert.ok(engines.length > 0, 'no engine folder found in sdk/engines/');
      const architecture = read(path.join(ROOT, 'README.md')).split('## Architecture')[1] ?? '';
      const index = itemOf(path.join(DOCS, 'README.md'), '- [engines.md](engines.md)');
      const headings = read(path.join(DOCS, 'engines.md')).split('\n').filter((l) => l.startsWith('## '));
      for (const name of engines) {
        assert.ok(architecture.includes(`\`sdk/engines/${name}/\``), `README.md's Architecture does not name \`sdk/engines/${name}/\``);
        assert.ok(new RegExp(`\\b${name}\\b`, 'i').test(index), `docs/README.md's line for engines.md does not name the ${name} engine`);
        assert.ok(headings.includes(`## ${name}`), `docs/engines.md has no \`## ${name}\` section`);
      }
    });
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
