import assert from 'node:assert/strict';
import { ApiError } from '../models/errors.js';
import { findKind, type KindSpec } from '../models/kinds.js';
import { ModelSchemaError, checkModelSchema, editDistance, modelInputCheck, nearest } from '../models/model-schema.js';
import type { ModelRecord } from '../models/types.js';
import { ajv } from '../models/validation.js';
import { MAX_MODEL_SCHEMA_BYTES } from '../sdk/protocol/limits.js';

const IMAGE = findKind('inference:image:generate')!;
const MESH = findKind('inference:3d:image-to-mesh')!;
const VIDEO = findKind('inference:video:generate')!;

/** The pointer of the ModelSchemaError that checking `schema` throws (fails if it throws none or another error). */
function refusal(kind: KindSpec, schema: unknown): { path: string; message: string } {
  try {
    checkModelSchema(kind, schema);
  } catch (err) {
    assert.ok(err instanceof ModelSchemaError, `not a ModelSchemaError: ${String(err)}`);
    return { path: err.path, message: err.message };
  }
  assert.fail(`accepted ${JSON.stringify(schema).slice(0, 200)}`);
}

const record = (input_schema: Record<string, unknown> | null, id = 'sdxl'): ModelRecord => ({
  kind: IMAGE.kind,
  id,
  description: null,
  input_schema,
  ranks: null,
  middle_ranks: null,
  declared: false,
  first_seen: null,
  last_seen: null,
  created_at: '2026-01-01T00:00:00.000Z',
  updated_at: '2026-01-01T00:00:00.000Z',
});

describe('model input schemas', () => {
  describe('checkModelSchema', () => {
    it("accepts schemas that add fields and narrow the kind's, with or without type", () => {
      const accepted: Array<[KindSpec, unknown]> = [
        [IMAGE, {}],
        [IMAGE, { type: 'object', properties: { steps: { type: 'integer', minimum: 1, maximum: 50 }, width: { type: 'integer', maximum: 1024 } }, required: ['steps'] }],
        [IMAGE, { properties: { sampler: { enum: ['euler', 'dpm'] } }, additionalProperties: true }],
        [IMAGE, { $defs: { n: { type: 'integer' } }, type: 'object', properties: { steps: { $ref: '#/$defs/n' }, name: { type: 'string', pattern: '^[a-z]+$' } } }],
        [VIDEO, { type: 'object', properties: { duration_s: { type: 'integer', maximum: 10 } } }],
        [MESH, { type: 'object', properties: { image: { type: 'string', 'x-switchyard-file': { accept: ['image/png'] } }, steps: { type: 'integer' } } }],
      ];
      for (const [kind, schema] of accepted) assert.doesNotThrow(() => checkModelSchema(kind, schema), JSON.stringify(schema));
    });

    it('refuses what is not a JSON object, or is larger than the limit', () => {
      for (const bad of [null, [], 'x', 5, true]) assert.equal(refusal(IMAGE, bad).path, '/');
      const huge = { type: 'object', properties: Object.fromEntries(Array.from({ length: 3000 }, (_, i) => [`field_${i}`, { type: 'string', maxLength: 1000 }])) };
      assert.ok(JSON.stringify(huge).length > MAX_MODEL_SCHEMA_BYTES);
      assert.match(refusal(IMAGE, huge).message, new RegExp(`at most ${MAX_MODEL_SCHEMA_BYTES}`));
    });

    it('refuses a schema that does not describe an object or that closes the input', () => {
      assert.equal(refusal(IMAGE, { type: 'array' }).path, '/type');
      assert.equal(refusal(IMAGE, { type: ['object', 'null'] }).path, '/type');
      assert.equal(refusal(IMAGE, { type: 'object', additionalProperties: false }).path, '/additionalProperties');
      assert.equal(refusal(IMAGE, { type: 'object', unevaluatedProperties: { type: 'string' } }).path, '/unevaluatedProperties');
    });

    it('refuses what does not compile with the strict ajv, pointing at the place', () => {
      const cases: Array<[unknown, string, RegExp]> = [
        [{ type: 'object', properties: { steps: { type: 'intger' } } }, '/properties/steps/type', /not valid JSON Schema/],
        [{ type: 'object', properties: { steps: { type: 'integer', stepz: 1 } } }, '/properties/steps/stepz', /unknown keyword/],
        [{ type: 'object', properties: { steps: { minimum: 1 } } }, '/properties/steps', /missing type "number"/],
        [{ type: 'object', properties: { a: { type: 'string', format: 'colour' } } }, '/properties/a', /unknown format/],
        [{ type: 'object', properties: { a: { $ref: 'https://example.com/schema.json' } } }, '/properties/a/$ref', /can't resolve/],
        [{ type: 'object', properties: { a: { type: 'string', pattern: '(' } } }, '/properties/a/pattern', /not a regular expression/],
        [{ $schema: 'http://json-schema.org/draft-07/schema#', type: 'object' }, '/$schema', /2020-12/],
      ];
      for (const [schema, path, message] of cases) {
        const got = refusal(IMAGE, schema);
        assert.equal(got.path, path, JSON.stringify(schema));
        assert.match(got.message, message);
      }
    });

    it('refuses $id, $async and patterns that can take exponential time', () => {
      assert.equal(refusal(IMAGE, { $id: 'https://example.com/m', type: 'object' }).path, '/$id');
      assert.equal(refusal(IMAGE, { type: 'object', properties: { a: { $id: 'https://example.com/a', type: 'string' } } }).path, '/properties/a/$id');
      assert.equal(refusal(IMAGE, { $async: true, type: 'object' }).path, '/$async');
      const redos = refusal(IMAGE, { type: 'object', properties: { name: { type: 'string', pattern: '^(a+)+$' } } });
      assert.equal(redos.path, '/properties/name/pattern');
      assert.match(redos.message, /exponential/);
      assert.equal(refusal(IMAGE, { type: 'object', patternProperties: { '^(x+)+/$': { type: 'string' } } }).path, '/patternProperties/^(x+)+~1$');
    });

    it("refuses redefining a kind field's type; narrowing number to integer is fine", () => {
      const got = refusal(IMAGE, { type: 'object', properties: { width: { type: 'string' } } });
      assert.equal(got.path, '/properties/width/type');
      assert.match(got.message, /"width" is integer/);
      assert.equal(refusal(VIDEO, { type: 'object', properties: { fps: { type: 'number' } } }).path, '/properties/fps/type', 'integer cannot widen to number');
    });

    it("refuses turning a kind's file field into a non-file, or widening what it accepts", () => {
      assert.equal(refusal(MESH, { type: 'object', properties: { image: { type: 'integer' } } }).path, '/properties/image/type');
      const unmarked = refusal(MESH, { type: 'object', properties: { image: { type: 'string', maxLength: 100 } } });
      assert.equal(unmarked.path, '/properties/image');
      assert.match(unmarked.message, /is a file in inference:3d:image-to-mesh: keep "x-switchyard-file"/);
      assert.equal(refusal(MESH, { type: 'object', properties: { image: { type: 'string', 'x-switchyard-file': { accept: ['video/mp4'] } } } }).path, '/properties/image/x-switchyard-file/accept');
      assert.equal(refusal(MESH, { type: 'object', properties: { image: { type: 'string', 'x-switchyard-file': {} } } }).path, '/properties/image/x-switchyard-file/accept');
    });

    it('refuses making any other field a file, wherever the marker hides', () => {
      const marker = { 'x-switchyard-file': { accept: ['image/png'] } };
      assert.equal(refusal(IMAGE, { type: 'object', properties: { mask: { type: 'string', ...marker } } }).path, '/properties/mask/x-switchyard-file');
      assert.equal(refusal(MESH, { type: 'object', allOf: [{ properties: { image: { type: 'string', ...marker } } }] }).path, '/allOf/0/properties/image/x-switchyard-file');
      assert.equal(refusal(MESH, { type: 'object', properties: { extra: { type: 'object', properties: { image: { type: 'string', ...marker } } } } }).path, '/properties/extra/properties/image/x-switchyard-file');
      // Data is not schema: an enum value or a default shaped like the marker is nothing.
      assert.doesNotThrow(() => checkModelSchema(IMAGE, { type: 'object', properties: { preset: { type: 'object', default: marker } } }));
    });

    it('is a 400 invalid_schema with the pointer in details', () => {
      try {
        checkModelSchema(IMAGE, { type: 'array' });
        assert.fail('accepted');
      } catch (err) {
        assert.ok(err instanceof ApiError);
        assert.equal(err.status, 400);
        assert.equal(err.code, 'invalid_schema');
        assert.deepEqual(err.details, { path: '/type' });
        assert.match(err.message, /^input_schema \/type: /);
      }
    });

    it("leaves nothing behind in the gateway's ajv", () => {
      const internals = ajv as unknown as { _cache: Map<unknown, unknown>; refs: object; schemas: object };
      const before = [internals._cache.size, Object.keys(internals.refs).length, Object.keys(internals.schemas).length];
      for (let i = 0; i < 20; i++) {
        checkModelSchema(IMAGE, { $defs: { n: { type: 'integer' } }, type: 'object', properties: { steps: { $ref: '#/$defs/n' } } });
        refusal(IMAGE, { type: 'object', properties: { steps: { type: 'integer', stepz: 1 } } });
      }
      assert.deepEqual([internals._cache.size, Object.keys(internals.refs).length, Object.keys(internals.schemas).length], before);
    });
  });

  describe('editDistance and nearest', () => {
    it('counts edits, a swap of neighbours as one', () => {
      assert.equal(editDistance('kitten', 'sitting'), 3);
      assert.equal(editDistance('widht', 'width'), 1);
      assert.equal(editDistance('', 'abc'), 3);
      assert.equal(editDistance('same', 'same'), 0);
    });

    it('suggests only a near field', () => {
      const known = ['prompt', 'model', 'width', 'height', 'seed', 'n'];
      assert.equal(nearest('widht', known), 'width');
      assert.equal(nearest('heigth', known), 'height');
      assert.equal(nearest('Prompt', known), 'prompt');
      assert.equal(nearest('sed', known), 'seed');
      assert.equal(nearest('x', known), 'n', 'one edit in one letter is a third of it, rounded up');
      assert.equal(nearest('xy', known), null);
      assert.equal(nearest('negative_prompt', known), null);
      assert.equal(nearest('anything', []), null);
    });
  });

  describe('modelInputCheck', () => {
    const schema = { type: 'object', properties: { steps: { type: 'integer', minimum: 1, maximum: 50 }, sampler: { enum: ['euler', 'dpm'] } } };

    it('without a model schema, accepts unknown fields and lists them as warnings with a hint', () => {
      for (const model of [null, record(null)]) {
        const got = modelInputCheck(IMAGE, model, { prompt: 'a cat', model: 'sdxl', widht: 512, negative_prompt: 'dogs' });
        assert.deepEqual(got.errors, []);
        assert.deepEqual(
          got.warnings.map((w) => w.path),
          ['/widht', '/negative_prompt'],
        );
        assert.match(got.warnings[0].message, /"widht" is not a field of inference:image:generate; it is passed to the worker as it is \(did you mean "width"\?\)/);
        assert.doesNotMatch(got.warnings[1].message, /did you mean/);
      }
      assert.deepEqual(modelInputCheck(IMAGE, null, { prompt: 'a cat', width: 512, model: 'x' }), { errors: [], warnings: [] });
    });

    it("with a model schema, checks the input against it and refuses fields neither schema names", () => {
      const model = record(schema);
      assert.deepEqual(modelInputCheck(IMAGE, model, { prompt: 'a cat', model: 'sdxl', width: 512, steps: 20, sampler: 'euler' }), { errors: [], warnings: [] });
      const got = modelInputCheck(IMAGE, model, { prompt: 'a cat', steps: 80, stpes: 20, 'a/b': 1 });
      assert.deepEqual(got.warnings, []);
      assert.deepEqual(
        got.errors.map((e) => e.path),
        ['/steps', '/stpes', '/a~1b'],
      );
      assert.match(got.errors[0].message, /<= 50/);
      assert.equal(got.errors[1].message, '"stpes" is not a field of model sdxl of inference:image:generate (did you mean "steps"?)');
      assert.doesNotMatch(got.errors[2].message, /did you mean/);
    });

    it('reuses validators by schema text, so a record read afresh for each job compiles once', () => {
      const compile = ajv.compile;
      let compiled = 0;
      ajv.compile = ((...args: Parameters<typeof compile>) => {
        compiled++;
        return compile.apply(ajv, args);
      }) as typeof compile;
      try {
        const fresh = { ...schema, properties: { ...schema.properties, cfg: { type: 'number' } } };
        for (let i = 0; i < 50; i++) modelInputCheck(IMAGE, record(structuredClone(fresh)), { prompt: 'x', steps: 1 });
        assert.equal(compiled, 1);
        assert.equal(modelInputCheck(IMAGE, record(structuredClone(fresh)), { prompt: 'x', steps: 0 }).errors.length, 1);
      } finally {
        ajv.compile = compile;
      }
    });
  });
});
