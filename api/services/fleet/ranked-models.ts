import { rankCounts, type ByTier, type ModelCounts } from '../../../dispatch/fleet-counters.js';
import { pipelinesOf } from '../../../dispatch/rank-placement.js';
import { DEFAULT_MIDDLE_RANKS, type MiddleRanks, type ModelRecord } from '../../../models/types.js';

/** What `/v1/capabilities` and `/v1/models` say of a ranked model (docs/ranks.md, "Seeing ranks"). */
export interface RankedModelView {
  ranks: number;
  middle_ranks: MiddleRanks;
  /** Per rank, rank 0 first: the workers that could take it now, by their tier. */
  ranks_available: Array<{ rank: number; workers: ByTier }>;
  /** Complete pipelines that could be formed now for a job of each tier (each on its own, not to be added up). */
  pipelines: ByTier;
}

/**
 * A catalogue model's rank view from the fleet's counts of it (summed over every instance), or
 * null for a whole model. Only workers of the catalogue's count are read: one that advertised
 * another count before an operator changed the model serves no pipeline of it.
 */
export function rankedModelView(model: Pick<ModelRecord, 'ranks' | 'middle_ranks'>, live: ModelCounts | undefined): RankedModelView | null {
  if (model.ranks === null) return null;
  const middle = model.middle_ranks ?? DEFAULT_MIDDLE_RANKS;
  const ranks = rankCounts(live, model.ranks);
  return {
    ranks: model.ranks,
    middle_ranks: middle,
    ranks_available: ranks.map((r, rank) => ({ rank, workers: r.by_tier })),
    pipelines: pipelinesOf(model.ranks, middle, ranks.map((r) => r.takes)),
  };
}

/** The same fields for a whole model, as `/v1/capabilities` shows them: null. */
export const WHOLE_MODEL = { ranks: null, middle_ranks: null, ranks_available: null, pipelines: null } as const;
