import assert from 'node:assert/strict';
import { rankedModelView } from '../api/services/fleet/ranked-models.js';
import type { ConnectedWorker } from '../dispatch/connected-worker.js';
import { addSnapshot, emptySnapshot, rankCounts, workerShare } from '../dispatch/fleet-snapshot.js';
import type { Tier } from '../models/kinds.js';
import type { WorkerModels } from '../sdk/protocol/index.js';

const LLM = 'inference:llm:text-generate';
const by = (open: number, trusted: number, priv = 0) => ({ open, trusted, private: priv });
const rank = (index: number, count = 3): WorkerModels => ({ [LLM]: [{ id: 'tiny', rank: { index, count } }] });
const later = new Date(Date.now() + 3_600_000).toISOString();

function worker(id: string, tier: Tier, models: WorkerModels, more: { tiers?: Tier[]; attested_until?: string | null; fallback_tier?: Tier; down?: boolean } = {}): ConnectedWorker {
  return {
    info: {
      worker_id: id,
      kinds: [LLM],
      tier,
      slots: 1,
      busy: 0,
      gateway_id: 'gw',
      owner: { type: 'operator', id: 'op' },
      hardware: {},
      software: {},
      models,
      connected_at: new Date().toISOString(),
      ...(more.attested_until !== undefined ? { attested_until: more.attested_until, fallback_tier: more.fallback_tier } : {}),
      ...(more.down ? { backend_down: { message: 'down', since: new Date().toISOString() } } : {}),
    },
    ...(more.tiers ? { tiers: more.tiers } : {}),
    queues: [],
    send: () => {},
    close: () => {},
    leases: new Set(),
    cursor: 0,
    filling: false,
    refill: false,
    draining: false,
  };
}

/**
 * A worker's share of the fleet counts carries its rank of a ranked model, by its tier and by
 * the tiers of work it takes (dispatch/fleet-snapshot.ts): what the pipeline counts read. Shares
 * add up across instances and come off again (a worker registering elsewhere is retired).
 */
describe('fleet counts of rank workers', () => {
  const now = Date.now();
  const model = (s: ReturnType<typeof emptySnapshot>) => s.kinds[LLM]?.models.tiny;

  it('counts each rank worker by its tier and by the tiers of work it takes; a private worker takes trusted work only for a vetted operator, and private only while attested', () => {
    const total = emptySnapshot();
    const shares = [
      worker('t0', 'trusted', rank(0), { tiers: ['trusted', 'open'] }),
      worker('p0', 'private', rank(0), { tiers: ['private', 'open'], attested_until: later, fallback_tier: 'open' }),
      worker('v1', 'private', rank(1), { tiers: ['private', 'trusted', 'open'], attested_until: later, fallback_tier: 'trusted' }),
      worker('l2', 'private', rank(2), { tiers: ['private', 'trusted', 'open'], attested_until: null, fallback_tier: 'trusted' }),
      worker('o2', 'open', rank(2)),
      worker('d2', 'trusted', rank(2), { down: true }),
    ].map((w) => workerShare(w, now));
    for (const s of shares) addSnapshot(total, s, 1);
    assert.deepEqual(rankCounts(model(total), 3), [
      { by_tier: by(0, 1, 1), takes: by(2, 1, 1) },
      { by_tier: by(0, 0, 1), takes: by(1, 1, 1) },
      { by_tier: by(1, 1, 0), takes: by(2, 1, 0) },
    ]);
    assert.equal(model(total)!.workers, 6, 'every rank worker serves the model; the one whose backend is down is not available for a rank');
    assert.deepEqual(rankedModelView({ ranks: 3, middle_ranks: 'trusted' }, model(total))!.pipelines, by(1, 1, 0));

    // A retired share comes off: its rank goes when no worker is left on it.
    addSnapshot(total, shares[2], -1);
    assert.deepEqual(rankCounts(model(total), 3)[1], { by_tier: by(0, 0, 0), takes: by(0, 0, 0) });
    assert.deepEqual(Object.keys(model(total)!.ranks!).sort(), ['0/3', '2/3']);
    for (const s of [shares[0], shares[1], shares[3], shares[4], shares[5]]) addSnapshot(total, s, -1);
    assert.equal(model(total), undefined, 'nothing left of the model');
  });

  it('reads only the catalogue’s count: workers of another count form no pipeline of it', () => {
    const total = emptySnapshot();
    for (const w of [worker('a', 'open', rank(0, 2)), worker('b', 'open', rank(1, 2)), worker('c', 'open', rank(1, 3))]) addSnapshot(total, workerShare(w, now), 1);
    assert.deepEqual(rankedModelView({ ranks: 2, middle_ranks: 'trusted' }, model(total))!.pipelines, by(1, 0, 0));
    const three = rankedModelView({ ranks: 3, middle_ranks: 'open' }, model(total))!;
    assert.deepEqual(three.ranks_available.map((r) => r.workers), [by(0, 0), by(1, 0), by(0, 0)]);
    assert.deepEqual(three.pipelines, by(0, 0, 0));
    assert.equal(rankedModelView({ ranks: null, middle_ranks: null }, model(total)), null, 'a whole model has no rank view');
  });

  it('a share written by an instance of an older version (no ranks) adds and comes off as before', () => {
    const total = emptySnapshot();
    const share = workerShare(worker('w', 'open', { [LLM]: [{ id: 'tiny' }] }), now);
    assert.equal(model(share)!.ranks, undefined, 'a whole model adds no rank counts');
    addSnapshot(total, JSON.parse(JSON.stringify(share)), 1);
    addSnapshot(total, workerShare(worker('r', 'open', rank(0, 2)), now), 1);
    addSnapshot(total, share, -1);
    assert.deepEqual(model(total)!.ranks, { '0/2': { by_tier: by(1, 0), takes: by(1, 0) } });
  });
});
