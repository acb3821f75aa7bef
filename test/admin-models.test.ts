import assert from 'node:assert/strict';
import { KIND_NAMES } from '../models/kinds.js';
import { MAX_MODEL_DESCRIPTION, MAX_MODEL_SCHEMA_BYTES } from '../sdk/protocol/limits.js';
import { ADMIN_TOKEN, TestGateway, cleanupPrefix, errorCode, uniquePrefix } from './helpers/harness.js';

const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
const IMAGE = 'inference:image:generate';
const LLM = 'inference:llm:text-generate';
const MESH = 'inference:3d:image-to-mesh';

describe('admin API: the model catalogue', () => {
  const prefix = uniquePrefix('admin-models');
  let gw: TestGateway;
  before(async () => {
    gw = await new TestGateway(prefix).start();
  });
  after(async () => {
    await gw?.stop();
    await cleanupPrefix(prefix);
  });

  const url = (kind: string, id: string) => `/v1/admin/models/${encodeURIComponent(kind)}/${encodeURIComponent(id)}`;
  const put = (kind: string, id: string, body: unknown) => gw.request('PUT', url(kind, id), { body, headers: admin });
  const get = (kind: string, id: string) => gw.request('GET', url(kind, id), { headers: admin });

  it('declares a model (201), replaces the declaration (200), and shows it', async () => {
    const schema = { type: 'object', properties: { steps: { type: 'integer', minimum: 1, maximum: 50 } } };
    const created = await put(IMAGE, 'sdxl', { description: 'Stable Diffusion XL', input_schema: schema });
    assert.equal(created.status, 201, created.text);
    const at = created.body.created_at;
    assert.ok(Date.parse(at) > Date.now() - 60_000);
    assert.deepEqual(created.body, {
      object: 'model',
      kind: IMAGE,
      id: 'sdxl',
      description: 'Stable Diffusion XL',
      input_schema: schema,
      ranks: null,
      middle_ranks: null,
      declared: true,
      first_seen: null,
      last_seen: null,
      created_at: at,
      updated_at: at,
    });
    assert.deepEqual((await get(IMAGE, 'sdxl')).body, created.body);

    const replaced = await put(IMAGE, 'sdxl', {});
    assert.equal(replaced.status, 200, replaced.text);
    assert.deepEqual({ ...replaced.body, updated_at: at }, { ...created.body, description: null, input_schema: null });
    assert.ok(replaced.body.updated_at >= at);
    assert.deepEqual((await get(IMAGE, 'sdxl')).body, replaced.body);
  });

  it('takes model ids with / and : as URL-encoded path segments', async () => {
    for (const id of ['meta-llama/Llama-3.1-8B-Instruct', 'llama3:8b', 'org/name@rev+1']) {
      const res = await put(LLM, id, { description: id });
      assert.equal(res.status, 201, `${id}: ${res.text}`);
      assert.equal(res.body.id, id);
      const read = await get(LLM, id);
      assert.equal(read.status, 200);
      assert.equal(read.body.id, id);
      assert.equal(read.body.description, id);
    }
    assert.deepEqual((await gw.stores.models.get(LLM, 'meta-llama/Llama-3.1-8B-Instruct'))?.id, 'meta-llama/Llama-3.1-8B-Instruct', 'stored decoded');
    // Unencoded, the slash splits the path: no such route.
    const raw = await gw.request('GET', `/v1/admin/models/${LLM}/meta-llama/Llama-3.1-8B-Instruct`, { headers: admin });
    assert.equal(raw.status, 404);
    assert.equal(errorCode(raw), 'not_found');
  });

  it('lists the catalogue by kind then id, every kind or one', async () => {
    await put(MESH, 'trellis', {});
    await gw.stores.models.advertise([{ kind: MESH, id: 'hunyuan3d', description: 'from a worker', input_schema: null }], new Date().toISOString());
    const all = await gw.request('GET', '/v1/admin/models', { headers: admin });
    assert.equal(all.status, 200);
    const keys = all.body.data.map((m: { kind: string; id: string }) => `${m.kind} ${m.id}`);
    assert.deepEqual(keys, [...keys].sort());
    assert.ok(keys.includes(`${MESH} hunyuan3d`) && keys.includes(`${IMAGE} sdxl`));
    const mesh = await gw.request('GET', `/v1/admin/models?kind=${encodeURIComponent(MESH)}`, { headers: admin });
    assert.deepEqual(
      mesh.body.data.map((m: { id: string; declared: boolean }) => [m.id, m.declared]),
      [
        ['hunyuan3d', false],
        ['trellis', true],
      ],
    );
    const unknown = await gw.request('GET', '/v1/admin/models?kind=inference:nope', { headers: admin });
    assert.equal(unknown.status, 400);
    assert.equal(errorCode(unknown), 'unknown_kind');
    assert.deepEqual(unknown.body.error.details.kinds, KIND_NAMES);
    assert.equal((await gw.request('GET', '/v1/admin/models?other=1', { headers: admin })).status, 400);
  });

  it('declares a model workers advertised (200): its sightings stay, and its words are now the operator\'s', async () => {
    const seen = new Date(Date.now() - 60_000).toISOString();
    await gw.stores.models.advertise([{ kind: IMAGE, id: 'flux', description: 'worker', input_schema: { type: 'object' } }], seen);
    const res = await put(IMAGE, 'flux', { description: 'operator' });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual([res.body.declared, res.body.description, res.body.input_schema, res.body.first_seen, res.body.created_at], [true, 'operator', null, seen, seen]);
  });

  it('refuses an unknown kind, a malformed id and a bad schema with 400 and the error envelope', async () => {
    const unknownKind = await put('inference:nope', 'sdxl', {});
    assert.equal(unknownKind.status, 400);
    assert.equal(errorCode(unknownKind), 'unknown_kind');
    assert.deepEqual(unknownKind.body.error.details.kinds, KIND_NAMES);

    for (const id of ['-leading-dash', 'has space', 'a'.repeat(201), 'ünï']) {
      const res = await put(IMAGE, id, {});
      assert.equal(res.status, 400, id);
      assert.equal(errorCode(res), 'invalid_request');
      assert.match(res.body.error.message, /invalid model id/);
    }

    const schemas: Array<[string, unknown, string]> = [
      [IMAGE, { type: 'object', properties: { width: { type: 'string' } } }, '/properties/width/type'],
      [IMAGE, { type: 'array' }, '/type'],
      [IMAGE, { type: 'object', properties: { steps: { type: 'integer', stepz: 1 } } }, '/properties/steps/stepz'],
      [MESH, { type: 'object', properties: { image: { type: 'string' } } }, '/properties/image'],
      [IMAGE, { type: 'object', properties: { mask: { type: 'string', 'x-switchyard-file': { accept: ['image/png'] } } } }, '/properties/mask/x-switchyard-file'],
      [IMAGE, { type: 'object', properties: Object.fromEntries(Array.from({ length: 2000 }, (_, i) => [`f${i}`, { type: 'string', description: 'x'.repeat(30) }])) }, '/'],
    ];
    for (const [kind, schema, path] of schemas) {
      const res = await put(kind, 'bad-schema', { input_schema: schema });
      assert.equal(res.status, 400, JSON.stringify(schema).slice(0, 100));
      assert.equal(errorCode(res), 'invalid_schema');
      assert.equal(res.body.error.details.path, path);
    }
    assert.ok(JSON.stringify(schemas[5][1]).length > MAX_MODEL_SCHEMA_BYTES);

    const bodies = [{ input_schema: 'x' }, { input_schema: [] }, { description: 5 }, { description: 'x'.repeat(MAX_MODEL_DESCRIPTION + 1) }, { kind: IMAGE }, []];
    for (const body of bodies) {
      const res = await put(IMAGE, 'bad-body', body);
      assert.equal(res.status, 400, JSON.stringify(body).slice(0, 100));
      assert.equal(errorCode(res), 'invalid_request');
    }
    const unparsable = await gw.request('PUT', url(IMAGE, 'bad-body'), { raw: '{"description":', headers: { ...admin, 'content-type': 'application/json' } });
    assert.equal(unparsable.status, 400);
    assert.equal(errorCode(unparsable), 'invalid_request');
    assert.equal((await get(IMAGE, 'bad-schema')).status, 404, 'nothing was declared');
    assert.equal((await get(IMAGE, 'bad-body')).status, 404);
  });

  it('answers 404 for a model that is not there, of an unknown kind, or with a malformed id', async () => {
    for (const [kind, id] of [
      [IMAGE, 'never-declared'],
      ['inference:nope', 'sdxl'],
      [IMAGE, '-bad'],
    ]) {
      for (const method of ['GET', 'DELETE']) {
        const res = await gw.request(method, url(kind, id), { headers: admin });
        assert.equal(res.status, 404, `${method} ${kind} ${id}`);
        assert.equal(errorCode(res), 'not_found');
      }
    }
    // A broken escape is not decoded, and no model id has a `%`.
    const broken = await gw.request('GET', `/v1/admin/models/${IMAGE}/sd%E0%A4%A`, { headers: admin });
    assert.equal(broken.status, 404);
    assert.equal(errorCode(broken), 'not_found');
    const brokenPut = await gw.request('PUT', `/v1/admin/models/${IMAGE}/sd%E0%A4%A`, { body: {}, headers: admin });
    assert.equal(brokenPut.status, 400);
    assert.equal(errorCode(brokenPut), 'invalid_request');
  });

  it('forgets a model (204), then it is gone (404)', async () => {
    await put(LLM, 'qwen2.5:7b', { description: 'to forget' });
    const res = await gw.request('DELETE', url(LLM, 'qwen2.5:7b'), { headers: admin });
    assert.equal(res.status, 204);
    assert.equal(res.text, '');
    assert.equal((await get(LLM, 'qwen2.5:7b')).status, 404);
    assert.equal(await gw.stores.models.get(LLM, 'qwen2.5:7b'), null);
    assert.equal((await gw.request('DELETE', url(LLM, 'qwen2.5:7b'), { headers: admin })).status, 404);
  });

  it('is behind the admin token', async () => {
    const { key } = await gw.account(10);
    const calls: Array<[string, string, unknown]> = [
      ['GET', '/v1/admin/models', undefined],
      ['PUT', url(IMAGE, 'sneaky'), {}],
      ['GET', url(IMAGE, 'sdxl'), undefined],
      ['DELETE', url(IMAGE, 'sdxl'), undefined],
    ];
    for (const [method, path, body] of calls) {
      for (const headers of [{}, { authorization: `Bearer ${key}` }, { authorization: 'Bearer not-the-admin-token' }] as Array<Record<string, string>>) {
        const res = await gw.request(method, path, { body, headers });
        assert.equal(res.status, 401, `${method} ${path}`);
        assert.equal(errorCode(res), 'unauthorized');
      }
    }
    assert.equal((await get(IMAGE, 'sneaky')).status, 404);
    assert.equal((await get(IMAGE, 'sdxl')).status, 200, 'still there');
  });
});
