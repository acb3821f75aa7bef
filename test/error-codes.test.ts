import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { ERROR_STATUS } from '../models/errors.js';

/**
 * models/errors.ts is the one place that maps error codes to statuses (docs/api.md). Read from
 * the source text, so an answer that bypasses it fails here: a code cast past the type checker,
 * an envelope written by hand with a code of its own, an error class that sets its own status,
 * or a raw HTTP answer assembled outside the error handler.
 */

const ROOT = path.resolve(import.meta.dirname, '..');
const read = (file: string) => readFileSync(path.join(ROOT, file), 'utf8');

function sourceFiles(dir: string): string[] {
  return readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((e) => {
    const rel = `${dir}/${e.name}`;
    if (e.isDirectory()) return e.name === 'node_modules' || e.name === 'dist' ? [] : sourceFiles(rel);
    return e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') ? [rel] : [];
  });
}

/** The gateway's source (the SDKs have their own error types). */
const GATEWAY = ['models', 'queues', 'dispatch', 'api'].flatMap(sourceFiles);
/**
 * Where envelopes of the API are written: the HTTP layer, the listener and the callers' and bots'
 * sockets (the workers' socket speaks the worker protocol's codes, docs/worker-protocol.md).
 */
const ANSWERING = GATEWAY.filter((f) => /^api\/(http|composition)\//.test(f) || /^api\/sockets\/(caller|bot)-socket-server\.ts$/.test(f));

/** Each `pattern` match's first group, with where it was found. */
function found(files: string[], pattern: RegExp): Array<{ code: string; where: string }> {
  return files.flatMap((file) => [...read(file).matchAll(pattern)].map((m) => ({ code: m[1], where: `${file}: ${m[0]}` })));
}

const unknown = (uses: Array<{ code: string; where: string }>) => uses.filter((u) => !Object.hasOwn(ERROR_STATUS, u.code)).map((u) => u.where);

describe('error codes', () => {
  it('every code given to an ApiError is in ERROR_STATUS', () => {
    const direct = found(GATEWAY, /\bApiError\(\s*'([^']*)'/g);
    // Subclasses name their code to super(); only classes that extend ApiError are read.
    const subclassed = found(
      GATEWAY.filter((f) => /extends ApiError\b/.test(read(f))),
      /\bsuper\(\s*'([^']*)'/g,
    );
    assert.ok(direct.length > 50, `only ${direct.length} ApiErrors found: the pattern no longer matches the source`);
    assert.ok(subclassed.length >= 5, `only ${subclassed.length} ApiError subclasses found`);
    assert.deepEqual(unknown([...direct, ...subclassed]), []);
  });

  it('every code of an envelope or error frame written by the HTTP layer and the callers\' sockets is in ERROR_STATUS', () => {
    const uses = found(ANSWERING, /\bcode: '([^']*)'/g);
    assert.ok(uses.length > 10, `only ${uses.length} codes found`);
    assert.deepEqual(unknown(uses), []);
  });

  it('statuses come from ERROR_STATUS alone: no error class sets its own, no raw HTTP answer is written outside the error handler', () => {
    assert.deepEqual(found(GATEWAY, /(readonly|override)[^\n;]*\bstatus\s*=\s*(\d{3})/g).map((u) => u.where), [], 'an error class with a status of its own');
    const raw = GATEWAY.filter((f) => f !== 'api/http/middleware/error-handler.ts' && /[`'"]HTTP\/1\.1 /.test(read(f)));
    assert.deepEqual(raw, [], 'status lines written by hand');
  });

  it("docs/api.md's table of codes gives each code its status", () => {
    const reference = read('docs/api.md');
    const rows = Object.entries(ERROR_STATUS).filter(([code, status]) => !reference.includes(`| \`${code}\` | ${status} |`));
    assert.deepEqual(rows, [], 'codes without a row of their status');
  });

  it("the TypeScript client's SwitchyardErrorCode names every code", () => {
    const union = read('sdk/client/errors.ts').split('export type SwitchyardErrorCode =')[1]?.split(';')[0] ?? '';
    const missing = Object.keys(ERROR_STATUS).filter((code) => !union.includes(`| '${code}'`));
    assert.deepEqual(missing, [], 'codes a TypeScript caller cannot match without a cast');
  });
});
