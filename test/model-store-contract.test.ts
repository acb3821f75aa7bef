import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { ModelDescription, Stores } from '../models/stores.js';
import { describeEachStore } from './helpers/store-targets.js';

/** The model catalogue's contract (ModelStore, models/stores.ts), against every store (MongoDB where MONGO_URL is set). */
describe('model store contract', () => {
  describeEachStore((stores, peer) => {
    // A kind of its own per test, so each test sees only its models.
    const newKind = () => `test:kind:${randomBytes(4).toString('hex')}`;
    const t = (second: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, second)).toISOString();
    const model = (kind: string, id: string, over: Partial<ModelDescription> = {}): ModelDescription => ({ kind, id, description: null, input_schema: null, ...over });

    it('adds an advertised model with first_seen = last_seen = at, undeclared', async () => {
      const kind = newKind();
      const schema = { type: 'object', properties: { steps: { type: 'integer' } } };
      await stores.models.advertise([model(kind, 'sdxl', { description: 'Stable Diffusion XL', input_schema: schema })], t(1));
      assert.deepEqual(await stores.models.get(kind, 'sdxl'), {
        kind,
        id: 'sdxl',
        description: 'Stable Diffusion XL',
        input_schema: schema,
        ranks: null,
        middle_ranks: null,
        declared: false,
        first_seen: t(1),
        last_seen: t(1),
        created_at: t(1),
        updated_at: t(1),
      });
      assert.equal(await stores.models.get(kind, 'flux'), null);
      assert.equal(await stores.models.get(newKind(), 'sdxl'), null, 'a model belongs to its kind');
    });

    it('refreshes a known model: last_seen moves, the latest advertisement wins, first_seen stays', async () => {
      const kind = newKind();
      await stores.models.advertise([model(kind, 'sdxl', { description: 'old', input_schema: { type: 'object' } })], t(1));
      await stores.models.advertise([model(kind, 'sdxl', { description: 'new', input_schema: { properties: { cfg: { type: 'number' } } } })], t(2));
      let got = await stores.models.get(kind, 'sdxl');
      assert.deepEqual(
        { ...got },
        { kind, id: 'sdxl', description: 'new', input_schema: { properties: { cfg: { type: 'number' } } }, ranks: null, middle_ranks: null, declared: false, first_seen: t(1), last_seen: t(2), created_at: t(1), updated_at: t(2) },
      );
      await stores.models.advertise([model(kind, 'sdxl')], t(3));
      got = await stores.models.get(kind, 'sdxl');
      assert.equal(got!.description, null, 'a worker that stops publishing a schema or description clears it');
      assert.equal(got!.input_schema, null);
      await stores.models.advertise([model(kind, 'sdxl')], t(4));
      got = await stores.models.get(kind, 'sdxl');
      assert.equal(got!.last_seen, t(4));
      assert.equal(got!.updated_at, t(3), 'a sighting that changes nothing it says leaves updated_at');
    });

    it('records many models of several kinds in one call, and does nothing for none', async () => {
      const [a, b] = [newKind(), newKind()];
      await stores.models.advertise([], t(1));
      await stores.models.advertise([model(a, 'm2'), model(b, 'x'), model(a, 'm1'), model(a, 'org/m3:q4')], t(5));
      assert.deepEqual((await stores.models.list(a)).map((m) => [m.id, m.first_seen]), [['m1', t(5)], ['m2', t(5)], ['org/m3:q4', t(5)]]);
      assert.deepEqual((await stores.models.list(b)).map((m) => m.id), ['x']);
    });

    it('keeps every byte of a schema and a description (empty arrays, big numbers, $ keys, dots, unicode)', async () => {
      const kind = newKind();
      const schema = {
        $defs: { 'a.b': { type: 'string', enum: [] } },
        type: 'object',
        required: [],
        properties: { n: { type: 'integer', maximum: 12345678901234567, minimum: -1e21, multipleOf: 0.1 }, e: {}, r: { $ref: '#/$defs/a.b' } },
      };
      const description = '$5 per image, "quoted" \\ back/slash, ünïcødé 🚀\n\u0001';
      await stores.models.advertise([model(kind, 'a', { description, input_schema: schema })], t(1));
      await stores.models.declare(model(kind, 'b', { description, input_schema: schema }), t(1));
      await stores.models.advertise([model(kind, 'b', { description: 'worker', input_schema: { type: 'object' } })], t(2));
      for (const id of ['a', 'b']) {
        const got = await stores.models.get(kind, id);
        assert.deepEqual(got!.input_schema, schema, id);
        assert.equal(JSON.stringify(got!.input_schema), JSON.stringify(schema), `${id}: key order too`);
        assert.equal(got!.description, description, id);
      }
    });

    it('declares a model ahead of any worker, then replaces it on redeclaration', async () => {
      const kind = newKind();
      const first = await stores.models.declare(model(kind, 'llama3:8b', { description: 'Llama 3 8B', input_schema: { type: 'object' } }), t(1));
      const expected = { kind, id: 'llama3:8b', description: 'Llama 3 8B', input_schema: { type: 'object' }, ranks: null, middle_ranks: null, declared: true, first_seen: null, last_seen: null, created_at: t(1), updated_at: t(1) };
      assert.deepEqual(first, { created: true, record: expected });
      assert.deepEqual(await stores.models.get(kind, 'llama3:8b'), expected);
      const again = await stores.models.declare(model(kind, 'llama3:8b', { description: null, input_schema: null }), t(2));
      const replaced = { ...expected, description: null, input_schema: null, updated_at: t(2) };
      assert.deepEqual(again, { created: false, record: replaced });
      assert.deepEqual(await stores.models.get(kind, 'llama3:8b'), replaced);
    });

    it("declaring an advertised model keeps its sightings; workers then only refresh last_seen, never the operator's words", async () => {
      const kind = newKind();
      await stores.models.advertise([model(kind, 'sdxl', { description: 'worker', input_schema: { type: 'object', properties: { a: {} } } })], t(1));
      const declared = await stores.models.declare(model(kind, 'sdxl', { description: 'operator', input_schema: { type: 'object', properties: { b: {} } } }), t(2));
      assert.equal(declared.created, false);
      assert.deepEqual({ ...declared.record, input_schema: null }, { kind, id: 'sdxl', description: 'operator', input_schema: null, ranks: null, middle_ranks: null, declared: true, first_seen: t(1), last_seen: t(1), created_at: t(1), updated_at: t(2) });
      await stores.models.advertise([model(kind, 'sdxl', { description: 'worker again', input_schema: { type: 'object', properties: { c: {} } } })], t(3));
      assert.deepEqual(await stores.models.get(kind, 'sdxl'), { ...declared.record, last_seen: t(3) });
      // A declared model no worker had shown: its first sighting sets first_seen too.
      await stores.models.declare(model(kind, 'flux'), t(4));
      await stores.models.advertise([model(kind, 'flux', { description: 'worker' })], t(5));
      const flux = await stores.models.get(kind, 'flux');
      assert.deepEqual([flux!.declared, flux!.description, flux!.first_seen, flux!.last_seen, flux!.updated_at], [true, null, t(5), t(5), t(4)]);
    });

    it('lists by kind then id, one kind or all of them', async () => {
      const [k1, k2] = [newKind(), newKind()].sort();
      await stores.models.advertise([model(k2, 'b'), model(k1, 'z'), model(k2, 'a')], t(1));
      await stores.models.declare(model(k1, 'a'), t(1));
      assert.deepEqual((await stores.models.list(k1)).map((m) => m.id), ['a', 'z']);
      const all = (await stores.models.list()).filter((m) => m.kind === k1 || m.kind === k2);
      assert.deepEqual(all.map((m) => `${m.kind} ${m.id}`), [`${k1} a`, `${k1} z`, `${k2} a`, `${k2} b`]);
      const everything = await stores.models.list();
      const keys = everything.map((m) => [m.kind, m.id] as const);
      assert.deepEqual(keys, [...keys].sort((x, y) => (x[0] === y[0] ? (x[1] < y[1] ? -1 : 1) : x[0] < y[0] ? -1 : 1)), 'every kind in order');
      assert.deepEqual(await stores.models.list(newKind()), []);
    });

    it('forgets a model; an advertisement brings it back undeclared, as new', async () => {
      const kind = newKind();
      await stores.models.advertise([model(kind, 'sdxl')], t(1));
      await stores.models.declare(model(kind, 'sdxl', { description: 'operator' }), t(2));
      assert.equal(await stores.models.remove(kind, 'sdxl'), true);
      assert.equal(await stores.models.get(kind, 'sdxl'), null);
      assert.deepEqual(await stores.models.list(kind), []);
      assert.equal(await stores.models.remove(kind, 'sdxl'), false);
      assert.equal(await stores.models.remove(newKind(), 'sdxl'), false);
      assert.ok(!(await stores.models.list()).some((m) => m.kind === kind), 'the whole listing forgets it too');
      await stores.models.advertise([model(kind, 'sdxl', { description: 'worker' })], t(3));
      assert.deepEqual(await stores.models.get(kind, 'sdxl'), {
        kind,
        id: 'sdxl',
        description: 'worker',
        input_schema: null,
        ranks: null,
        middle_ranks: null,
        declared: false,
        first_seen: t(3),
        last_seen: t(3),
        created_at: t(3),
        updated_at: t(3),
      });
    });

    it('never lets a concurrent advertisement overwrite a declaration (two instances, many rounds)', async () => {
      const kind = newKind();
      const other = await peer();
      const operator = { type: 'object', properties: { steps: { type: 'integer', maximum: 50 } } };
      const worker = { type: 'object', properties: { steps: { type: 'integer' } } };
      const ids = Array.from({ length: 40 }, (_, i) => `m${i}`);
      // Half the models were advertised before the race, half are new to it.
      await stores.models.advertise(ids.filter((_, i) => i % 2 === 0).map((id) => model(kind, id, { description: 'worker', input_schema: worker })), t(1));
      await Promise.all(
        ids.flatMap((id, i) => {
          const advertise = (s: Stores, at: number) => s.models.advertise([model(kind, id, { description: 'worker', input_schema: worker })], t(at));
          // Advertisements land before and after the declaration, from both instances.
          return [advertise(stores, 2), advertise(other, 3), other.models.declare(model(kind, id, { description: 'operator', input_schema: operator }), t(4)), advertise(stores, 5), advertise(other, 6)].slice(
            i % 3,
          );
        }),
      );
      for (const id of ids) {
        const got = await stores.models.get(kind, id);
        assert.equal(got!.declared, true, id);
        assert.equal(got!.description, 'operator', id);
        assert.deepEqual(got!.input_schema, operator, id);
      }
      assert.equal((await stores.models.list(kind)).length, ids.length, 'one record per model, whatever the race');
    });

    it('creates one record when instances race to a new model', async () => {
      const kind = newKind();
      const other = await peer();
      const results = await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 ? other : stores).models.declare(model(kind, 'race', { description: `d${i}` }), t(i))));
      assert.equal(results.filter((r) => r.created).length, 1, 'exactly one declaration created it');
      await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 ? other : stores).models.advertise([model(kind, `new-${i % 3}`)], t(i))));
      assert.deepEqual((await stores.models.list(kind)).map((m) => m.id), ['new-0', 'new-1', 'new-2', 'race']);
    });
  });
});
