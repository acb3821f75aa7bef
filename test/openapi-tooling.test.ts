import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { KIND_INPUT_EXAMPLES } from '../api/http/openapi/kind-examples.js';
import { KINDS } from '../models/kinds.js';
import { TestGateway, cleanupPrefix, uniquePrefix } from './helpers/harness.js';

/**
 * The served document passes `redocly lint` with Redocly's defaults (the recommended rules, no
 * configuration: as anyone who lints it gets them) and makes a client with openapi-typescript that
 * a program submitting every kind type-checks against, while programs with a wrong field, kind or
 * class do not. Everything runs offline from node_modules.
 */

const ROOT = path.resolve(import.meta.dirname, '..');
const run = promisify(execFile);
// No telemetry and no update check: the tests may have no network, and should not use it.
const QUIET = { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' };

/** Exit code and output of a command that may fail. */
async function attempt(file: string, args: string[], cwd = ROOT): Promise<{ code: number; out: string }> {
  try {
    const { stdout, stderr } = await run(file, args, { cwd, env: QUIET, maxBuffer: 64 << 20 });
    return { code: 0, out: stdout + stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : -1, out: `${e.stdout ?? ''}${e.stderr ?? ''}` };
  }
}

/** `redocly lint` of `file`, run in its directory, which holds no Redocly configuration: the default rules. */
async function lint(file: string): Promise<{ totals: { errors: number; warnings: number }; problems: Array<{ ruleId: string; message: string }> }> {
  const dir = path.dirname(file);
  assert.deepEqual(readdirSync(dir).filter((f) => /^(redocly|\.redocly)\./.test(f)), [], 'a Redocly configuration beside the document');
  const { out } = await attempt(process.execPath, [path.join(ROOT, 'node_modules/@redocly/cli/bin/cli.js'), 'lint', '--format=json', file], dir);
  const json = out.slice(out.indexOf('{'), out.lastIndexOf('}') + 1);
  return JSON.parse(json);
}

/** tsc's complaints, by file name, about the given programs (none: an empty map). */
async function typeErrors(dir: string, files: string[]): Promise<Map<string, string[]>> {
  const tsconfig = path.join(dir, `tsconfig-${files.length}-${path.basename(files[0])}.json`);
  const compilerOptions = { strict: true, noEmit: true, target: 'ES2023', module: 'NodeNext', moduleResolution: 'NodeNext', types: [], skipLibCheck: false };
  writeFileSync(tsconfig, JSON.stringify({ compilerOptions, files: ['api.d.ts', ...files] }));
  const { code, out } = await attempt(path.join(ROOT, 'node_modules/.bin/tsc'), ['-p', tsconfig, '--pretty', 'false'], dir);
  const errors = new Map<string, string[]>();
  for (const m of out.matchAll(/^([^\s(]+)\(\d+,\d+\): error (.*)$/gm)) errors.set(path.basename(m[1]), [...(errors.get(path.basename(m[1])) ?? []), m[2]]);
  assert.ok(code === 0 || errors.size > 0, `tsc failed without a type error: ${out}`);
  return errors;
}

const program = (body: string) => `import type { components, operations } from './api.js';\n${body}\n`;

describe('OpenAPI document and its tools', function () {
  this.timeout(120_000);
  const prefix = uniquePrefix('openapi-tools');
  const gw = new TestGateway(prefix);
  let dir: string;
  let docFile: string;
  let doc: any;
  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'switchyard-openapi-'));
    await gw.start();
    doc = (await gw.request('GET', '/v1/openapi.json')).body;
    docFile = path.join(dir, 'openapi.json');
    writeFileSync(docFile, JSON.stringify(doc, null, 2));
  });
  after(async () => {
    await gw.stop();
    await cleanupPrefix(prefix);
    rmSync(dir, { recursive: true, force: true });
  });

  it('passes redocly lint with its default (recommended) rules and no configuration, without a warning', async () => {
    const result = await lint(docFile);
    assert.deepEqual(result.problems.map((p) => `${p.ruleId}: ${p.message}`), []);
    assert.deepEqual(result.totals, { ...result.totals, errors: 0, warnings: 0 });
  });

  it('and the lint finds a broken document', async () => {
    const broken = structuredClone(doc);
    delete broken.paths['/v1/jobs'].post.operationId;
    broken.paths['/v1/jobs'].get.responses['200'].content['application/json'].schema = { $ref: '#/components/schemas/NoSuchThing' };
    const file = path.join(dir, 'broken.json');
    writeFileSync(file, JSON.stringify(broken));
    const rules = new Set((await lint(file)).problems.map((p) => p.ruleId));
    assert.ok(rules.has('operation-operationId') && rules.has('no-unresolved-refs'), [...rules].join(', '));
  });

  describe('a client generated with openapi-typescript', () => {
    before(async () => {
      // --default-non-nullable false: a field with a default (class, confidentiality) stays optional in a request.
      const gen = await attempt(process.execPath, [
        '--import',
        path.join(ROOT, 'test/helpers/typescript5-hook.mjs'),
        path.join(ROOT, 'node_modules/openapi-typescript/bin/cli.js'),
        docFile,
        '--default-non-nullable',
        'false',
        '--output',
        path.join(dir, 'api.d.ts'),
      ]);
      assert.equal(gen.code, 0, gen.out);
    });

    it('types a program that submits every kind, and reads the answers', async () => {
      const requests = KINDS.map((k) => `  ${JSON.stringify({ kind: k.kind, input: KIND_INPUT_EXAMPLES[k.kind] })},`).join('\n');
      writeFileSync(
        path.join(dir, 'submit-every-kind.ts'),
        program(`
type JobRequest = components['schemas']['JobRequest'];
type SubmitBody = operations['submitJob']['requestBody']['content']['application/json'];
export const requests: JobRequest[] = [
${requests}
];
export const full: SubmitBody = { kind: 'inference:image:generate', input: { prompt: 'x' }, class: 'batch', confidentiality: 'private', webhook: 'https://example.com/h', webhook_events_filter: ['start', 'completed'] };
// The kind tells the input apart: a rig job's input has its mesh.
export function meshOf(r: JobRequest): string | null {
  return r.kind === 'inference:rig' ? r.input.mesh : null;
}
type Accepted = operations['submitJob']['responses'][202]['content']['application/json'];
type Job = components['schemas']['Job'];
export const done = (j: Job): boolean => j.terminal && (j.status === 'succeeded' || j.status === 'failed' || j.status === 'canceled');
export const urls = (j: Job): string[] => j.output?.urls ?? [];
// The kind tells the output apart too: an image job's width, a transcript's text, when its worker reported them.
export const width = (j: Job): number | undefined => (j.kind === 'inference:image:generate' ? j.output?.width : undefined);
export const transcript = (j: Job): string | undefined => (j.kind === 'inference:audio:transcribe' ? j.output?.text : undefined);
export const sizes = (j: Job): Array<number | null> => (j.output?.files ?? []).map((f) => f.size);
export const accepted = (a: Accepted): string => a.run_id + a.kind + a.class + a.confidentiality;
export const code = (e: components['schemas']['Error']): components['schemas']['ErrorCode'] => e.error.code;
// OpenAI's clients send fields the gateway does not name; the request takes them, as the server does.
// Free-form objects (JSON Schemas, error details) take and give any fields.
export const tool: components['schemas']['CreateToolRequest'] = { name: 'weather', description: 'd', kind: 'webhook', url: 'https://example.com/t', inputSchema: { type: 'object', properties: { city: { type: 'string' } } } };
export const model: components['schemas']['DeclareModelRequest'] = { description: null, input_schema: { type: 'object', properties: { steps: { type: 'integer' } } } };
export const needed = (e: components['schemas']['Error']): unknown => e.error.details?.needed;
export const chat: components['schemas']['ChatCompletionRequest'] = { model: 'm', messages: [{ role: 'user', content: 'hi', name: 'ann' }], store: false };
`),
      );
      assert.equal(KINDS.length, Object.keys(KIND_INPUT_EXAMPLES).length, 'an example input for every kind');
      const errors = await typeErrors(dir, ['submit-every-kind.ts']);
      assert.deepEqual(Object.fromEntries(errors), {});
    });

    it('refuses a wrong field type, an unknown kind, a missing file field, an unknown class and another kind\'s output', async () => {
      const bad: Record<string, string> = {
        'wrong-field-type.ts': `export const r: components['schemas']['JobRequest'] = { kind: 'inference:image:generate', input: { prompt: 5 } };`,
        'unknown-kind.ts': `export const r: components['schemas']['JobRequest'] = { kind: 'inference:image:make', input: { prompt: 'x' } };`,
        'missing-file.ts': `export const r: components['schemas']['JobRequest'] = { kind: 'inference:rig', input: { skeleton: 'humanoid' } };`,
        'unknown-class.ts': `export const r: operations['submitJob']['requestBody']['content']['application/json'] = { kind: 'inference:rig', input: { mesh: 'file_x' }, class: 'urgent' };`,
        'neither-prompt-nor-image.ts': `export const r: components['schemas']['JobRequest'] = { kind: 'inference:video:generate', input: { fps: 12 } };`,
        // A rig job's output has no width of a known type, and an image job's width is a number.
        'output-of-another-kind.ts': `export const w = (j: components['schemas']['Job']): number | undefined => (j.kind === 'inference:rig' ? j.output?.width : undefined);`,
        'output-field-type.ts': `export const w = (j: components['schemas']['Job']): string | undefined => (j.kind === 'inference:image:generate' ? j.output?.width : undefined);`,
      };
      for (const [name, body] of Object.entries(bad)) writeFileSync(path.join(dir, name), program(body));
      const errors = await typeErrors(dir, Object.keys(bad));
      assert.deepEqual(Object.keys(bad).filter((name) => !errors.has(name)), [], 'programs that type-check but should not');
    });
  });
});
