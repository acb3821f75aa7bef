import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { ModelDescription } from '../models/stores.js';
import { describeEachStore } from './helpers/store-targets.js';

/**
 * The catalogue's rank counts (docs/ranks.md): a model's count is set by its first advertisement
 * or an operator's declaration, and from then on an advertisement of another count is refused
 * whole, recording nothing. Against every store (MongoDB where MONGO_URL is set).
 */
describe('model store: rank counts', () => {
  describeEachStore((stores, peer) => {
    const newKind = () => `test:kind:${randomBytes(4).toString('hex')}`;
    const t = (second: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, second)).toISOString();
    const model = (kind: string, id: string, ranks: number | null = null, over: Partial<ModelDescription> = {}): ModelDescription => ({ kind, id, description: null, input_schema: null, ranks, ...over });

    it('a ranked model new to the catalogue takes the advertised count, with middle ranks trusted', async () => {
      const kind = newKind();
      assert.equal(await stores.models.advertise([model(kind, 'tiny', 3), model(kind, 'whole')], t(1)), null);
      const tiny = await stores.models.get(kind, 'tiny');
      assert.deepEqual([tiny!.ranks, tiny!.middle_ranks, tiny!.declared, tiny!.first_seen], [3, 'trusted', false, t(1)]);
      const whole = await stores.models.get(kind, 'whole');
      assert.deepEqual([whole!.ranks, whole!.middle_ranks], [null, null]);
      assert.equal(await stores.models.advertise([model(kind, 'tiny', 3)], t(2)), null, 'the same count again');
      assert.equal((await stores.models.get(kind, 'tiny'))!.last_seen, t(2));
    });

    it('refuses another count, a ranked model advertised whole and a whole one advertised ranked, recording nothing of the call', async () => {
      const kind = newKind();
      await stores.models.advertise([model(kind, 'tiny', 3), model(kind, 'whole')], t(1));
      const cases: Array<[ModelDescription, number | null, number | null]> = [
        [model(kind, 'tiny', 4), 3, 4],
        [model(kind, 'tiny'), 3, null],
        [model(kind, 'whole', 2), null, 2],
      ];
      for (const [m, catalogue, advertised] of cases) {
        // A new model beside it, listed first: refused with the rest, so not recorded.
        const conflict = await stores.models.advertise([model(kind, 'fresh', null, { description: 'new' }), { ...m, description: 'changed' }], t(5));
        assert.deepEqual(conflict, { kind, id: m.id, catalogue, advertised });
      }
      assert.equal(await stores.models.get(kind, 'fresh'), null, 'nothing of a refused advertisement is recorded');
      assert.deepEqual(
        (await stores.models.list(kind)).map((m) => [m.id, m.ranks, m.description, m.last_seen]),
        [
          ['tiny', 3, null, t(1)],
          ['whole', null, null, t(1)],
        ],
      );
    });

    it('an operator declares ranks and middle ranks, which advertisements then must match; a whole declaration clears both', async () => {
      const kind = newKind();
      await stores.models.advertise([model(kind, 'tiny', 3)], t(1));
      const declared = await stores.models.declare(model(kind, 'tiny', 4, { description: 'split in 4', middle_ranks: 'open' }), t(2));
      assert.deepEqual([declared.created, declared.record.ranks, declared.record.middle_ranks, declared.record.first_seen], [false, 4, 'open', t(1)]);
      assert.deepEqual(await stores.models.advertise([model(kind, 'tiny', 3)], t(3)), { kind, id: 'tiny', catalogue: 4, advertised: 3 }, 'the operator changed the count');
      assert.equal(await stores.models.advertise([model(kind, 'tiny', 4)], t(4)), null);
      assert.deepEqual(await stores.models.get(kind, 'tiny'), { ...declared.record, last_seen: t(4) }, 'a sighting changes nothing an operator said');
      const defaulted = await stores.models.declare(model(kind, 'tiny', 4), t(5));
      assert.equal(defaulted.record.middle_ranks, 'trusted', 'a PUT is whole: middle_ranks left out is the default');
      const whole = await stores.models.declare(model(kind, 'tiny', null, { middle_ranks: 'open' }), t(6));
      assert.deepEqual([whole.record.ranks, whole.record.middle_ranks], [null, null]);
      assert.deepEqual(await stores.models.advertise([model(kind, 'tiny', 4)], t(7)), { kind, id: 'tiny', catalogue: null, advertised: 4 });
      const fresh = await stores.models.declare(model(kind, 'ahead', 2, { middle_ranks: 'open' }), t(8));
      assert.deepEqual([fresh.created, fresh.record.ranks, fresh.record.middle_ranks, fresh.record.first_seen], [true, 2, 'open', null]);
      assert.equal(await stores.models.advertise([model(kind, 'ahead', 2)], t(9)), null);
    });

    it('forgetting a model forgets its count: the next advertisement sets it again', async () => {
      const kind = newKind();
      await stores.models.advertise([model(kind, 'tiny', 3)], t(1));
      assert.equal(await stores.models.remove(kind, 'tiny'), true);
      assert.equal(await stores.models.advertise([model(kind, 'tiny', 5)], t(2)), null);
      assert.equal((await stores.models.get(kind, 'tiny'))!.ranks, 5);
    });

    it('when two instances first advertise a model with different counts at once, one count wins and the other is refused', async () => {
      const kind = newKind();
      const other = await peer();
      for (let round = 0; round < 10; round++) {
        const id = `race-${round}`;
        const [a, b] = await Promise.all([stores.models.advertise([model(kind, id, 2)], t(1)), other.models.advertise([model(kind, id, 3)], t(1))]);
        const won = (await stores.models.get(kind, id))!.ranks;
        assert.ok(won === 2 || won === 3, `round ${round}: ${won}`);
        assert.deepEqual([a, b].filter(Boolean), [{ kind, id, catalogue: won, advertised: won === 2 ? 3 : 2 }], `round ${round}`);
      }
    });
  });
});
