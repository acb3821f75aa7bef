import assert from 'node:assert/strict';
import { mayHoldRank, missingRanks, pipelinesOf, rankPlacement, rankWorkerTiers, type ByTier, type RankSeat } from '../dispatch/rank-placement.js';
import { TIERS, type Tier } from '../models/kinds.js';
import { MIDDLE_RANKS, type MiddleRanks } from '../models/types.js';
import { MAX_RANKS } from '../sdk/protocol/index.js';

/**
 * The placement rule of ranked models (dispatch/rank-placement.ts, docs/ranks.md): which
 * workers may hold each rank of a job, for every job tier, rank, count and middle-rank policy.
 */

/** The workers there are, by the tiers of work each takes (a worker's `tiers`). */
const WORKERS: Record<string, Tier[]> = {
  open: ['open'],
  trusted: ['trusted', 'open'],
  'private, vetted operator': ['private', 'trusted', 'open'],
  'private, unvetted operator': ['private', 'open'],
  'private whose evidence lapsed, vetted operator': ['trusted', 'open'],
};

const seat = (jobTier: Tier, rank: number, count: number, middleRanks?: MiddleRanks): RankSeat => ({ jobTier, rank, count, ...(middleRanks ? { middleRanks } : {}) });
const who = (s: RankSeat) => Object.keys(WORKERS).filter((w) => mayHoldRank(WORKERS[w], s));

describe('rank placement', () => {
  it('a 3-rank model, every job tier, rank and policy, and who may hold it', () => {
    const all = Object.keys(WORKERS);
    const vetted = ['trusted', 'private, vetted operator', 'private whose evidence lapsed, vetted operator'];
    const attested = ['private, vetted operator', 'private, unvetted operator'];
    // [job tier, middle_ranks, rank] -> [tier of work needed, worker tiers as counted, who may hold it]
    const table: Array<[Tier, MiddleRanks, number, Tier, Tier[], string[]]> = [
      ['open', 'trusted', 0, 'open', ['open', 'trusted', 'private'], all],
      ['open', 'trusted', 1, 'open', ['open', 'trusted', 'private'], all],
      ['open', 'trusted', 2, 'open', ['open', 'trusted', 'private'], all],
      ['open', 'open', 0, 'open', ['open', 'trusted', 'private'], all],
      ['open', 'open', 1, 'open', ['open', 'trusted', 'private'], all],
      ['open', 'open', 2, 'open', ['open', 'trusted', 'private'], all],
      ['trusted', 'trusted', 0, 'trusted', ['trusted', 'private'], vetted],
      ['trusted', 'trusted', 1, 'trusted', ['trusted', 'private'], vetted],
      ['trusted', 'trusted', 2, 'trusted', ['trusted', 'private'], vetted],
      ['trusted', 'open', 0, 'trusted', ['trusted', 'private'], vetted],
      ['trusted', 'open', 1, 'open', ['open', 'trusted', 'private'], all],
      ['trusted', 'open', 2, 'trusted', ['trusted', 'private'], vetted],
      ['private', 'trusted', 0, 'private', ['private'], attested],
      ['private', 'trusted', 1, 'private', ['private'], attested],
      ['private', 'trusted', 2, 'private', ['private'], attested],
      ['private', 'open', 0, 'private', ['private'], attested],
      ['private', 'open', 1, 'private', ['private'], attested],
      ['private', 'open', 2, 'private', ['private'], attested],
    ];
    for (const [jobTier, middle, rank, needed, tiers, holders] of table) {
      const s = seat(jobTier, rank, 3, middle);
      const label = `${jobTier} job, middle_ranks ${middle}, rank ${rank} of 3`;
      assert.equal(rankPlacement(s), needed, label);
      assert.deepEqual(rankWorkerTiers(s), tiers, label);
      assert.deepEqual(who(s), holders, label);
    }
  });

  it('the input and output ranks of a trusted job never go to an open worker, nor to an unvetted operator’s private worker', () => {
    for (let count = 2; count <= MAX_RANKS; count++) {
      for (const middle of MIDDLE_RANKS) {
        for (const rank of [0, count - 1]) {
          const holders = who(seat('trusted', rank, count, middle));
          assert.ok(!holders.includes('open') && !holders.includes('private, unvetted operator'), `rank ${rank} of ${count}, ${middle}: ${holders.join(', ')}`);
        }
      }
    }
  });

  it('every count from 2 to MAX_RANKS: edges trusted, middles by policy (trusted by default), open and private jobs alike on every rank', () => {
    for (let count = 2; count <= MAX_RANKS; count++) {
      for (let rank = 0; rank < count; rank++) {
        const edge = rank === 0 || rank === count - 1;
        assert.equal(rankPlacement(seat('open', rank, count)), 'open');
        assert.equal(rankPlacement(seat('private', rank, count, 'open')), 'private');
        assert.equal(rankPlacement(seat('trusted', rank, count)), 'trusted', 'the default policy keeps every rank of a trusted job vetted');
        assert.equal(rankPlacement(seat('trusted', rank, count, 'trusted')), 'trusted');
        assert.equal(rankPlacement(seat('trusted', rank, count, 'open')), edge ? 'trusted' : 'open', `rank ${rank} of ${count}`);
      }
    }
    // Two ranks: both are edges, so middle_ranks changes nothing.
    assert.deepEqual([0, 1].map((rank) => rankPlacement(seat('trusted', rank, 2, 'open'))), ['trusted', 'trusted']);
  });

  it('refuses a rank or count that cannot be', () => {
    for (const [rank, count] of [
      [3, 3],
      [-1, 3],
      [0.5, 3],
      [0, 1],
      [0, MAX_RANKS + 1],
      [0, Number.NaN],
    ]) {
      assert.throws(() => rankPlacement(seat('open', rank, count)), RangeError, `${rank} of ${count}`);
    }
  });
});

describe('pipelines that could be formed', () => {
  const by = (open: number, trusted: number, priv = 0): ByTier => ({ open, trusted, private: priv });
  /** `takes` of one rank from workers by kind: each counts under every tier of work it takes. */
  const rank = (workers: Partial<Record<keyof typeof WORKERS, number>>): ByTier => {
    const t = by(0, 0, 0);
    for (const [w, n] of Object.entries(workers)) for (const tier of WORKERS[w]) t[tier] += n ?? 0;
    return t;
  };

  it('a trusted pipeline needs vetted workers on ranks 0 and n-1; an open middle worker counts only with middle_ranks open', () => {
    const takes = [rank({ trusted: 1 }), rank({ open: 1 }), rank({ trusted: 1 })];
    assert.deepEqual(pipelinesOf(3, 'trusted', takes), by(1, 0, 0));
    assert.deepEqual(pipelinesOf(3, 'open', takes), by(1, 1, 0));
    assert.deepEqual(pipelinesOf(3, 'open', [rank({ open: 1 }), rank({ open: 1 }), rank({ trusted: 1 })]), by(1, 0, 0), 'an open worker on rank 0 forms no trusted pipeline');
  });

  it('counts disjoint pipelines: the fewest eligible workers over the ranks, per job tier', () => {
    const takes = [rank({ trusted: 2, open: 3 }), rank({ open: 4, trusted: 1 }), rank({ trusted: 3, 'private, unvetted operator': 2 })];
    assert.deepEqual(pipelinesOf(3, 'trusted', takes), by(5, 1, 0), 'open: min(5, 5, 5); trusted: min(2, 1, 3)');
    assert.deepEqual(pipelinesOf(3, 'open', takes), by(5, 2, 0), 'trusted with open middles: min(2, 5, 3)');
    const priv = [rank({ 'private, vetted operator': 2 }), rank({ 'private, unvetted operator': 1, 'private, vetted operator': 1 })];
    assert.deepEqual(pipelinesOf(2, 'trusted', priv), by(2, 1, 2), 'a private worker of an unvetted operator serves private and open pipelines only');
  });

  it('a rank nobody serves means no pipeline of any tier', () => {
    assert.deepEqual(pipelinesOf(3, 'open', [rank({ trusted: 5 }), rank({ trusted: 5 })]), by(0, 0, 0));
    assert.deepEqual(pipelinesOf(2, 'trusted', []), by(0, 0, 0));
  });

  it('the ranks a job of each tier waits for: those with no worker the rule allows, agreeing with the pipeline count', () => {
    const takes = [rank({ open: 1 }), rank({ open: 2 }), rank({ 'private, unvetted operator': 1 })];
    assert.deepEqual(missingRanks('open', 3, 'trusted', takes), []);
    assert.deepEqual(missingRanks('trusted', 3, 'trusted', takes), [0, 1, 2], 'neither open workers nor an unvetted operator’s private one hold a trusted job’s ranks');
    assert.deepEqual(missingRanks('trusted', 3, 'open', takes), [0, 2], 'open middles: the open rank 1 workers count');
    assert.deepEqual(missingRanks('private', 3, 'open', takes), [0, 1]);
    assert.deepEqual(missingRanks('open', 4, 'open', takes), [3], 'a rank nobody serves');
    for (const jobTier of TIERS) {
      for (const middle of MIDDLE_RANKS) assert.equal(missingRanks(jobTier, 3, middle, takes).length === 0, pipelinesOf(3, middle, takes)[jobTier] > 0, `${jobTier}, ${middle}`);
    }
  });
});
