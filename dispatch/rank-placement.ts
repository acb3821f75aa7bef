import { TIERS, type Tier } from '../models/kinds.js';
import { DEFAULT_MIDDLE_RANKS, type MiddleRanks } from '../models/types.js';
import { MAX_RANKS } from '../sdk/protocol/index.js';
import { TIER_RANK } from './connected-worker.js';

/**
 * Where the ranks of a ranked model's job may run (docs/ranks.md, "Placement"). The rule lives
 * here alone, as one pure function: the fleet's pipeline counts (`pipelinesOf`) use it now and
 * the scheduler's gang lease will, so what is shown and what is leased cannot disagree.
 */

/** One rank of one job: the job's tier, which rank, of how many, and its model's policy. */
export interface RankSeat {
  jobTier: Tier;
  /** 0 to `count - 1`. */
  rank: number;
  /** The model's rank count (2 to MAX_RANKS). */
  count: number;
  /** The model's `middle_ranks` (catalogue). @defaultValue 'trusted' */
  middleRanks?: MiddleRanks;
}

/**
 * The tier of work a worker must take to hold this rank: a worker may hold it when this tier is
 * among the tiers it takes leases from (its own and the weaker ones; a private worker, while
 * attested, private and the tiers its token's trust allows).
 *
 * - an open job: `open` on every rank, so any worker;
 * - a private job: `private` on every rank, so attested workers only;
 * - a trusted job: `trusted` on rank 0 (it sees the input) and rank `count - 1` (it makes the
 *   output), so vetted operators' workers, trusted or private; the ranks between follow the
 *   model's `middle_ranks`: `trusted` (the default) likewise, `open` any worker.
 *
 * A private worker of an unvetted operator does not take trusted work, edge rank or not: its
 * evidence vouches for the GPU, not for the process that reads the input (docs/confidentiality.md).
 */
export function rankPlacement({ jobTier, rank, count, middleRanks = DEFAULT_MIDDLE_RANKS }: RankSeat): Tier {
  if (!Number.isInteger(count) || count < 2 || count > MAX_RANKS) throw new RangeError(`a ranked model has 2 to ${MAX_RANKS} ranks, not ${count}`);
  if (!Number.isInteger(rank) || rank < 0 || rank >= count) throw new RangeError(`rank ${rank} is not one of 0 to ${count - 1}`);
  if (jobTier !== 'trusted') return jobTier;
  const edge = rank === 0 || rank === count - 1;
  return edge ? 'trusted' : middleRanks;
}

/**
 * The tiers of workers that may hold the rank, as workers count by tier: those of the tier
 * `rankPlacement` names or a stronger one. For `trusted` this includes private workers, which
 * the lease itself admits only when their token's operator is vetted (their `tiers`).
 */
export function rankWorkerTiers(seat: RankSeat): Tier[] {
  const needed = TIER_RANK[rankPlacement(seat)];
  return TIERS.filter((t) => TIER_RANK[t] >= needed);
}

/** Whether a worker taking work of `workerTiers` (its `tiers`) may hold the rank. */
export const mayHoldRank = (workerTiers: readonly Tier[], seat: RankSeat): boolean => workerTiers.includes(rankPlacement(seat));

export type ByTier = Record<Tier, number>;

/**
 * How many complete pipelines of a ranked model could be formed now, for a job of each tier,
 * from `takes[r]`: the workers serving rank r that could be offered a lease now, counted once
 * under each tier of work they take (a trusted worker under `trusted` and `open`).
 *
 * A worker serves one rank of a model (its model ids are unique), so the ranks never compete
 * for a worker and the greedy count is exact: for each job tier T, the fewest eligible workers
 * over the ranks, `min over r of takes[r][rankPlacement(T, r)]`. Each tier's figure assumes
 * every worker goes to jobs of that tier; the three are not to be added up.
 */
export function pipelinesOf(count: number, middleRanks: MiddleRanks, takes: readonly ByTier[]): ByTier {
  const out = { open: 0, trusted: 0, private: 0 };
  for (const jobTier of TIERS) {
    let fewest = Infinity;
    for (let rank = 0; rank < count; rank++) fewest = Math.min(fewest, takes[rank]?.[rankPlacement({ jobTier, rank, count, middleRanks })] ?? 0);
    out[jobTier] = fewest;
  }
  return out;
}

/**
 * The ranks, rank 0 first, that no worker could hold now for a job of `jobTier`: those whose
 * `takes[r]` has no worker taking the tier `rankPlacement` names. Empty when a pipeline could be
 * formed. What a queued job's `waiting_ranks` says (docs/ranks.md, "Waiting for a pipeline").
 */
export function missingRanks(jobTier: Tier, count: number, middleRanks: MiddleRanks, takes: readonly ByTier[]): number[] {
  const missing: number[] = [];
  for (let rank = 0; rank < count; rank++) if ((takes[rank]?.[rankPlacement({ jobTier, rank, count, middleRanks })] ?? 0) <= 0) missing.push(rank);
  return missing;
}
