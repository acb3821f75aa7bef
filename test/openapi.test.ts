import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Validator } from '@seriousme/openapi-schema-validator';
import { routeSpecs } from '../api/composition/routes.js';
import { ERROR_EXAMPLES, OPERATION_EXAMPLES } from '../api/http/openapi/examples.js';
import { jobComponent } from '../api/http/openapi/job-objects.js';
import { inputComponent, outputComponent, requestComponent } from '../api/http/openapi/job-requests.js';
import { ERROR_STATUS } from '../models/errors.js';
import { ARTIFACTS_KEYWORD, FILE_KEYWORD, JOB_CLASSES, KINDS, KIND_NAMES, TIERS, fileFields } from '../models/kinds.js';
import { RUN_STATUSES } from '../models/types.js';
import { createDemoEngine } from '../sdk/engines/demo/index.js';
import type { Engine } from '../sdk/engines/types.js';
import { SwitchyardWorker, silentLogger } from '../sdk/worker/index.js';
import { TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';
import { docValidator, refsIn, resolveRefs } from './helpers/openapi-doc.js';
import { kindInputs } from './helpers/kind-inputs.js';

describe('OpenAPI document', () => {
  const prefix = uniquePrefix('openapi');
  // The artifacts of the runs of every kind go here, not into the working directory's .data.
  const dataDir = mkdtempSync(join(tmpdir(), 'openapi-'));
  const gw = new TestGateway(prefix, { DATA_DIR: dataDir });
  let doc: any;
  let check: ReturnType<typeof docValidator>;
  /** The published schema of an operation's answer. */
  const responseSchema = (path: string, method: string, status: number) => doc.paths[path][method].responses[String(status)].content['application/json'].schema;
  before(async () => {
    await gw.start();
    const res = await gw.request('GET', '/v1/openapi.json');
    assert.equal(res.status, 200, 'served without a credential');
    doc = res.body;
    check = docValidator(doc);
  });
  after(async () => {
    await gw.stop();
    await cleanupPrefix(prefix);
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('is a valid OpenAPI 3.1 document', async () => {
    assert.equal(doc.openapi, '3.1.0');
    const result = await new Validator().validate(structuredClone(doc));
    assert.equal(result.valid, true, JSON.stringify(result.errors, null, 2));
  });

  it('documents every route the gateway mounts, and nothing else', () => {
    const documented = Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops as object).map((m) => `${m.toUpperCase()} ${path}`));
    const mounted = routeSpecs(gw.services).map((spec) => `${spec.method.toUpperCase()} ${spec.path}`);
    assert.ok(mounted.length > 40, `only ${mounted.length} routes mounted`);
    assert.deepEqual([...documented].sort(), [...mounted].sort());
  });

  it('names its schemas once, as components, and uses every one', () => {
    const schemas = doc.components.schemas;
    for (const name of ['Error', 'ErrorCode', 'Kind', 'RunStatus', 'JobClass', 'Confidentiality', 'JobRequest', 'Job', 'JobAccepted', 'JobList', 'Capabilities', 'Capacity', 'File', 'Tool', 'Bot', 'Account', 'Model']) {
      assert.ok(schemas[name], `no component ${name}`);
    }
    // Schemas, and the response headers shared by many answers (the rate-limit fields).
    const all = refsIn({ paths: doc.paths, components: doc.components });
    for (const ref of all.filter((r) => r.startsWith('#/components/headers/'))) assert.ok(ref.slice(21) in doc.components.headers, `dangling ${ref}`);
    const refs = all.filter((r) => !r.startsWith('#/components/headers/'));
    for (const ref of refs) assert.ok(ref.startsWith('#/components/schemas/') && ref.slice(21) in schemas, `dangling ${ref}`);
    const used = new Set(refs.map((r) => r.slice(21)));
    const unused = Object.keys(schemas).filter((name) => !used.has(name));
    assert.deepEqual(unused, [], 'components nothing refers to');
    assert.equal(responseSchema('/v1/jobs/{run_id}', 'get', 200).$ref, '#/components/schemas/Job');
    assert.equal(responseSchema('/v1/jobs', 'get', 200).$ref, '#/components/schemas/JobList');
    assert.equal(schemas.JobList.properties.data.items.$ref, '#/components/schemas/Job');
  });

  it('has enums for kinds, statuses, classes, tiers and error codes, taken from the code', () => {
    const schemas = doc.components.schemas;
    assert.deepEqual(schemas.Kind.enum, KIND_NAMES);
    assert.deepEqual(schemas.RunStatus.enum, RUN_STATUSES);
    assert.deepEqual(schemas.JobClass.enum, JOB_CLASSES);
    assert.deepEqual(schemas.Confidentiality.enum, TIERS);
    assert.deepEqual(schemas.ErrorCode.enum, Object.keys(ERROR_STATUS));
    assert.equal(schemas.Error.properties.error.properties.code.$ref, '#/components/schemas/ErrorCode');
    for (const spec of KINDS) {
      const job = schemas[jobComponent(spec.kind)];
      assert.equal(job.properties.kind.const, spec.kind);
      for (const [name, ref] of [['status', 'RunStatus'], ['class', 'JobClass'], ['confidentiality', 'Confidentiality']]) {
        assert.equal(job.properties[name].$ref, `#/components/schemas/${ref}`, `${spec.kind} ${name}`);
      }
    }
    assert.equal(schemas.JobAccepted.properties.kind.$ref, '#/components/schemas/Kind');
  });

  it("takes one job request per kind, told apart by kind, its input the kind's own schema with its file fields marked", () => {
    const schemas = doc.components.schemas;
    assert.equal(doc.paths['/v1/jobs'].post.requestBody.content['application/json'].schema.$ref, '#/components/schemas/JobRequest');
    const union = schemas.JobRequest;
    assert.deepEqual(union.oneOf.map((r: { $ref: string }) => r.$ref), KINDS.map((k) => `#/components/schemas/${requestComponent(k.kind)}`));
    assert.equal(union.discriminator.propertyName, 'kind');
    assert.deepEqual(union.discriminator.mapping, Object.fromEntries(KINDS.map((k) => [k.kind, `#/components/schemas/${requestComponent(k.kind)}`])));
    for (const spec of KINDS) {
      const request = schemas[requestComponent(spec.kind)];
      assert.deepEqual(request.required, ['kind', 'input']);
      assert.equal(request.properties.kind.const, spec.kind);
      assert.equal(request.properties.input.$ref, `#/components/schemas/${inputComponent(spec.kind)}`);
      const input = schemas[inputComponent(spec.kind)];
      assert.deepEqual(input, JSON.parse(JSON.stringify(spec.inputSchema)), spec.kind);
      const marked = Object.entries(input.properties as Record<string, Record<string, unknown>>).filter(([, p]) => p[FILE_KEYWORD]);
      assert.deepEqual(Object.fromEntries(marked.map(([n, p]) => [n, p[FILE_KEYWORD]])), fileFields(spec), spec.kind);
      for (const [name, prop] of marked) assert.match(String(prop.description), /file id .*https URL.*data: URI/, `${spec.kind} ${name}`);
    }
  });

  it('publishes job request schemas the server agrees with, case by case', async () => {
    const published = doc.paths['/v1/jobs'].post.requestBody.content['application/json'].schema;
    const { key } = await gw.account(100_000);
    const inputs = await kindInputs();
    const bodies: unknown[] = [
      { kind: 'inference:image:generate', input: { prompt: 'x' }, class: 'batch', confidentiality: 'private' },
      // A public address literal: the SSRF guard also resolves webhook hosts at submission, and tests may have no DNS.
      { kind: 'inference:image:generate', input: { prompt: 'x' }, webhook: 'https://93.184.215.14/hook' },
      { kind: 'inference:image:generate', input: { prompt: 'x' }, webhook: 'ftp://example.com/hook' },
      { kind: 'inference:image:generate', input: { prompt: 'x' }, webhook_events_filter: ['start'] },
      { kind: 'inference:image:generate', input: { prompt: 'x' }, priority: 1 },
      { kind: 'inference:image:generate', input: 'x' },
      { kind: 'inference:image:generate', input: { prompt: 'x' }, class: 'urgent' },
      { kind: 'inference:image:make', input: { prompt: 'x' } },
      { input: { prompt: 'x' } },
      { kind: 'inference:video:generate', input: { fps: 10 } },
      { kind: 'inference:llm:text-generate', input: { max_tokens: 10 } },
      ...KINDS.flatMap((k) => [
        { kind: k.kind, input: inputs[k.kind] },
        { kind: k.kind, input: {} },
        { kind: k.kind, input: { ...inputs[k.kind], seed: 'one', max_tokens: 'ten', text: 5, prompt: 5 } },
      ]),
    ];
    for (const body of bodies) {
      const res = await gw.submit(key, body);
      const error = check(published, body);
      assert.equal(res.status === 202, error === null, `${JSON.stringify(body).slice(0, 200)} -> ${res.status} ${res.text.slice(0, 200)}; schema: ${error}`);
      if (res.status === 202) assert.equal(check(responseSchema('/v1/jobs', 'post', 202), res.body), null, 'the 202 answer');
      else assert.equal(check(doc.components.schemas.Error, res.body), null, 'the error answer');
    }
  });

  it('describes real answers truthfully: jobs, lists, cancels, errors in either style', async () => {
    const { key } = await gw.account(1000);
    const submitted = await gw.submit(key, { kind: 'inference:image:generate', input: { prompt: 'x' } });
    const id = submitted.body.run_id;
    const answers: Array<[string, string, string, number, any]> = [
      ['/v1/jobs/{run_id}', 'get', `/v1/jobs/${id}`, 200, undefined],
      ['/v1/jobs', 'get', '/v1/jobs', 200, undefined],
      ['/v1/jobs/{run_id}/cancel', 'post', `/v1/jobs/${id}/cancel`, 200, undefined],
      ['/v1/jobs/{run_id}', 'get', `/v1/jobs/${id}`, 200, undefined],
      ['/v1/account', 'get', '/v1/account', 200, undefined],
      ['/v1/network/capacity', 'get', '/v1/network/capacity', 200, undefined],
      ['/v1/jobs/{run_id}', 'get', '/v1/jobs/run_00000000000000000000000000', 404, undefined],
      ['/v1/jobs/{run_id}/cancel', 'post', `/v1/jobs/${id}/cancel`, 409, undefined],
      ['/v1/jobs', 'post', '/v1/jobs', 400, { kind: 'inference:image:make', input: {} }],
      // The OpenAI surface answers errors in OpenAI's shape, and its operations say so.
      ['/v1/models/{model}', 'get', '/v1/models/no-such-model', 404, undefined],
      ['/v1/chat/completions', 'post', '/v1/chat/completions', 400, { model: 'm', messages: [] }],
    ];
    for (const [path, method, url, status, body] of answers) {
      const res = await gw.request(method.toUpperCase(), url, { key, body });
      assert.equal(res.status, status, `${method} ${url}: ${res.text}`);
      const schema = responseSchema(path, method, status);
      assert.equal(check(schema, res.body), null, `${method} ${url}: ${res.text}`);
    }
  });

  it("shows each kind's outputs, the same in components and in /v1/capabilities, as the published schemas say", async () => {
    const { key } = await gw.account(10);
    const caps = await gw.request<{ kinds: Array<Record<string, any>> }>('GET', '/v1/capabilities', { key });
    assert.equal(check(responseSchema('/v1/capabilities', 'get', 200), caps.body), null);
    for (const spec of KINDS) {
      const component = doc.components.schemas[outputComponent(spec.kind)];
      assert.deepEqual(resolveRefs(component, doc), JSON.parse(JSON.stringify(spec.output.schema)), spec.kind);
      assert.deepEqual(component[ARTIFACTS_KEYWORD].map((a: { name: string }) => a.name), spec.output.artifacts.map((a) => a.name));
      const served = caps.body.kinds.find((k) => k.kind === spec.kind)!;
      assert.deepEqual({ artifacts: served.output_artifacts, schema: served.output_schema }, JSON.parse(JSON.stringify({ artifacts: spec.output.artifacts, schema: spec.output.schema })), spec.kind);
      // What the gateway guarantees, and no more: urls, and the files it writes itself.
      assert.deepEqual(component.required, ['urls', 'files'], spec.kind);
      assert.equal(component.properties.files.items.$ref, '#/components/schemas/OutputFile');
    }
  });

  it("publishes one job object per kind, told apart by kind, its output the kind's output schema", () => {
    const schemas = doc.components.schemas;
    assert.deepEqual(schemas.Job.oneOf.map((r: { $ref: string }) => r.$ref), KINDS.map((k) => `#/components/schemas/${jobComponent(k.kind)}`));
    assert.deepEqual(schemas.Job.discriminator, { propertyName: 'kind', mapping: Object.fromEntries(KINDS.map((k) => [k.kind, `#/components/schemas/${jobComponent(k.kind)}`])) });
    for (const spec of KINDS) {
      const job = schemas[jobComponent(spec.kind)];
      assert.deepEqual(job.properties.output.anyOf, [{ $ref: `#/components/schemas/${outputComponent(spec.kind)}` }, { type: 'null' }], spec.kind);
      assert.ok(job.required.includes('kind'), spec.kind);
    }
    for (const [path, method, status] of [['/v1/jobs/{run_id}', 'get', 200], ['/v1/jobs/{run_id}/cancel', 'post', 200], ['/v1/jobs', 'post', 201]] as const) {
      assert.equal(responseSchema(path, method, status).$ref, '#/components/schemas/Job', `${method} ${path}`);
    }
  });

  it('describes succeeded jobs of every kind: as the demo engine reports them, and from a worker that reports nothing but urls', async function () {
    this.timeout(90_000);
    const { key } = await gw.account(100_000);
    const inputs = await kindInputs();
    const runAll = async (handler: Engine) => {
      const worker = new SwitchyardWorker({ gateway: gw.url, token: await gw.workerToken('open', `op-${randomUUID()}`), kinds: 'all', slots: 4, handler, logger: silentLogger });
      await worker.start();
      try {
        const ids = await Promise.all(KINDS.map(async (k) => (await gw.submit(key, { kind: k.kind, input: inputs[k.kind] })).body.run_id as string));
        const job = async (id: string) => (await gw.request('GET', `/v1/jobs/${id}`, { key })).body;
        return await Promise.all(ids.map((id) => until(`${id} to end`, async () => ((await job(id)).terminal ? job(id) : undefined), 30_000)));
      } finally {
        await worker.stop();
      }
    };
    const demo = await runAll(createDemoEngine({ delayMs: 0, espeakNg: null, pocketsphinx: null }));
    const bare = await runAll(async () => ({ artifacts: [] }));
    for (const job of [...demo, ...bare]) {
      assert.equal(job.status, 'succeeded', `${job.kind}: ${JSON.stringify(job.error)}`);
      assert.equal(check(responseSchema('/v1/jobs/{run_id}', 'get', 200), job), null, `${job.kind}: ${JSON.stringify(job.output).slice(0, 300)}`);
    }
    assert.deepEqual(Object.keys(bare[0].output), ['urls', 'files'], 'the bare worker reported no field of its kind');
    const list = await gw.request('GET', '/v1/jobs?limit=100', { key });
    assert.equal(check(responseSchema('/v1/jobs', 'get', 200), list.body), null);
    // The kind chooses the output schema: a field of the kind's, mistyped, is not an image job's.
    const image = demo.find((j) => j.kind === 'inference:image:generate');
    assert.notEqual(check(responseSchema('/v1/jobs/{run_id}', 'get', 200), { ...image, output: { ...image.output, width: 'wide' } }), null);
  });

  it('has examples for every operation, each valid against its schema', () => {
    const operations = Object.values(doc.paths).flatMap((item) => Object.values(item as Record<string, any>));
    assert.deepEqual(Object.keys(OPERATION_EXAMPLES).filter((id) => !operations.some((op) => op.operationId === id)), [], 'examples of no operation');
    let checked = 0;
    for (const op of operations) {
      const body = op.requestBody?.content['application/json'];
      if (body) assert.ok(body.example !== undefined || body.examples, `${op.operationId}: no request example`);
      const answers = Object.entries(op.responses as Record<string, any>).flatMap(([status, res]) =>
        Object.entries((res.content ?? {}) as Record<string, any>).map(([type, media]) => ({ status: Number(status), type, media })),
      );
      const successes = answers.filter((a) => a.status < 400 && a.type !== '*/*');
      const shown = successes.length ? successes : answers;
      assert.ok(shown.some((a) => a.media.example !== undefined), `${op.operationId}: no example of ${shown.map((a) => a.status).join(', ')}`);
      const values = [
        ...(body ? [body.example, ...Object.values((body.examples ?? {}) as Record<string, { value: unknown }>).map((e) => e.value)].filter((v) => v !== undefined).map((v) => ({ schema: body.schema, v })) : []),
        ...answers.filter((a) => a.media.example !== undefined).map((a) => ({ schema: a.media.schema, v: a.media.example })),
      ];
      for (const { schema, v } of values) {
        if (typeof v === 'string' && !schema.$ref && schema.type !== 'object') continue; // text bodies: SSE, HTML, metrics
        assert.equal(check(schema, v), null, `${op.operationId}: ${JSON.stringify(v).slice(0, 200)}`);
        checked++;
      }
    }
    assert.ok(checked > operations.length, `only ${checked} examples checked`);
    for (const [status, { error }] of Object.entries(ERROR_EXAMPLES)) assert.equal(ERROR_STATUS[error.code as keyof typeof ERROR_STATUS], Number(status), error.code);
    const submit = doc.paths['/v1/jobs'].post.requestBody.content['application/json'].examples;
    assert.deepEqual(Object.values(submit).map((e: any) => e.value.kind), KIND_NAMES, 'a request example of every kind');
  });

  it('describes errors with the error envelope of docs/api.md and names the auth schemes', () => {
    const err = doc.components.schemas.Error;
    assert.deepEqual(err.required, ['error']);
    assert.ok(doc.components.securitySchemes.bearer && doc.components.securitySchemes.serviceKey);
    assert.equal(doc.paths['/v1/jobs'].post.responses['402'].content['application/json'].schema.$ref, '#/components/schemas/Error');
    assert.deepEqual(doc.paths['/healthz'].get.security, []);
  });
});
