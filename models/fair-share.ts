import type { JobClass } from './kinds.js';

/**
 * Fair shares between accounts of one class (docs/architecture.md, "Priorities"). A job's
 * BullMQ priority (1 = most urgent) is its class's band plus its rank: how many of its
 * account's runs of its kind were in flight (queued or running) when it was submitted, divided
 * by the account's share of a round (FAIR_SHARE_STEP × its weight). BullMQ serves equal
 * priorities first in, first out, so two accounts' bursts interleave: each account's first
 * jobs (rank 0) before any account's second, an account of weight w getting w jobs a round.
 */

/** Ranks a band holds: an account this far ahead of its share stays at the band's end. */
export const RANK_CAP = 599_999;

/** Each class's band starts here; bands never overlap, and the last ends below BullMQ's limit (2^21 - 1). */
export const CLASS_PRIORITY: Record<JobClass, number> = { interactive: 1, standard: 600_001, batch: 1_200_001 };

/** The highest weight an account may be given: more would make its shares outweigh every other account's. */
export const MAX_WEIGHT = 1000;

/** A job's rank within its band: its account's runs of its kind in flight before it, per share of a round. */
export function fairRank(inFlightOfKind: number, step: number, weight: number): number {
  return Math.min(Math.floor(inFlightOfKind / (step * Math.max(1, weight))), RANK_CAP);
}
