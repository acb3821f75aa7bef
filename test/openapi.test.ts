import assert from 'node:assert/strict';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { routeSpecs } from '../api/http/app.js';
import * as S from '../api/contract/schemas.js';
import { ARTIFACTS_KEYWORD, KINDS } from '../models/kinds.js';
import { TestGateway, cleanupPrefix, uniquePrefix } from './helpers/harness.js';

describe('OpenAPI document', () => {
  const prefix = uniquePrefix('openapi');
  const gw = new TestGateway(prefix);
  let doc: any;
  before(async () => {
    await gw.start();
    const res = await gw.request('GET', '/v1/openapi.json');
    assert.equal(res.status, 200, 'served without a credential');
    doc = res.body;
  });
  after(async () => {
    await gw.stop();
    await cleanupPrefix(prefix);
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

  it('publishes the very schema that validates job submissions', async () => {
    const published = doc.paths['/v1/jobs'].post.requestBody.content['application/json'].schema;
    assert.deepEqual(published, JSON.parse(JSON.stringify(S.submitJobBody)));
    // And the server agrees with the published schema, case by case.
    const ajv = new Ajv2020({ strict: false });
    (addFormats as unknown as (a: Ajv2020) => void)(ajv);
    const validate = ajv.compile(published);
    const { key } = await gw.account(1000);
    const bodies = [
      { kind: 'inference:image:generate', input: { prompt: 'x' } },
      { kind: 'inference:image:generate', input: { prompt: 'x' }, class: 'batch', confidentiality: 'private' },
      // A public address literal: the SSRF guard also resolves webhook hosts at submission, and tests may have no DNS.
      { kind: 'inference:image:generate', input: { prompt: 'x' }, webhook: 'https://93.184.215.14/hook' },
      { kind: 'inference:image:generate', input: { prompt: 'x' }, webhook: 'ftp://example.com/hook' },
      { kind: 'inference:image:generate', input: { prompt: 'x' }, priority: 1 },
      { kind: 'inference:image:generate', input: 'x' },
      { kind: 'inference:image:generate', input: { prompt: 'x' }, class: 'urgent' },
      { input: { prompt: 'x' } },
    ];
    for (const body of bodies) {
      const res = await gw.submit(key, body);
      assert.equal(res.status === 202, validate(body), `${JSON.stringify(body)} -> ${res.status}`);
    }
  });

  it("shows each kind's outputs, the same in components and in /v1/capabilities, as the published schemas say", async () => {
    const { key } = await gw.account(10);
    const caps = await gw.request<{ kinds: Array<Record<string, any>> }>('GET', '/v1/capabilities', { key });
    const ajv = new Ajv2020({ strict: false });
    (addFormats as unknown as (a: Ajv2020) => void)(ajv);
    const published = doc.paths['/v1/capabilities'].get.responses['200'].content['application/json'].schema;
    assert.ok(ajv.validate(published, caps.body), JSON.stringify(ajv.errors));
    for (const spec of KINDS) {
      const component = doc.components.schemas[`output.${spec.kind.replaceAll(':', '.')}`];
      assert.deepEqual(component, JSON.parse(JSON.stringify(spec.output.schema)), spec.kind);
      assert.deepEqual(component[ARTIFACTS_KEYWORD].map((a: { name: string }) => a.name), spec.output.artifacts.map((a) => a.name));
      const served = caps.body.kinds.find((k) => k.kind === spec.kind)!;
      assert.deepEqual({ artifacts: served.output_artifacts, schema: served.output_schema }, JSON.parse(JSON.stringify(spec.output)), spec.kind);
    }
    // A job's output always has urls and the gateway's files.
    assert.deepEqual(doc.paths['/v1/jobs/{run_id}'].get.responses['200'].content['application/json'].schema.properties.output.anyOf[0].required, ['urls', 'files']);
    assert.deepEqual(Object.keys(doc.paths['/v1/jobs/{run_id}'].get.responses['200'].content['application/json'].schema.properties.output.anyOf[0].properties), ['urls', 'files']);
  });

  it('describes errors with the error envelope of docs/api.md and names the auth schemes', () => {
    const err = doc.components.schemas.Error;
    assert.deepEqual(err.required, ['error']);
    assert.ok(doc.components.securitySchemes.bearer && doc.components.securitySchemes.serviceKey);
    assert.equal(doc.paths['/v1/jobs'].post.responses['402'].content['application/json'].schema.$ref, '#/components/schemas/Error');
    assert.deepEqual(doc.paths['/healthz'].get.security, []);
  });
});
