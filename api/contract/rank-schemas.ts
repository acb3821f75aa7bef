import { MIDDLE_RANKS } from '../../models/types.js';
import { MAX_RANKS } from '../../sdk/protocol/limits.js';

/**
 * The fields a ranked model adds where models are shown (docs/ranks.md): the catalogue's
 * (`ranks`, `middle_ranks`) and the live fleet's (`ranks_available`, `pipelines`). They feed the
 * admin model, `/v1/capabilities` and `/v1/models` schemas and the OpenAPI document.
 */

const nullable = (schema: object) => ({ anyOf: [schema, { type: 'null' }] });

const byTier = {
  type: 'object',
  required: ['open', 'trusted', 'private'],
  properties: { open: { type: 'integer' }, trusted: { type: 'integer' }, private: { type: 'integer' } },
} as const;

export const ranks = { type: 'integer', minimum: 2, maximum: MAX_RANKS, description: 'The ranks (pipeline stages) the model is served in; null: whole (docs/ranks.md)' } as const;

export const middleRanks = {
  enum: [...MIDDLE_RANKS],
  description: 'Who may hold the ranks between the first and the last of a trusted job: `trusted` (vetted operators only, the default) or `open` (any worker); null for a whole model',
} as const;

export const ranksAvailable = {
  type: 'array',
  description: 'Per rank, rank 0 first: the workers serving it that could take it now (connected, their backend answering), by their tier',
  items: { type: 'object', required: ['rank', 'workers'], properties: { rank: { type: 'integer', minimum: 0 }, workers: byTier } },
} as const;

export const pipelines = {
  ...byTier,
  description:
    'Complete pipelines that could be formed now for a job of each tier, by the placement rule: the fewest eligible workers over the ranks. Each tier on its own: the three are not to be added up',
} as const;

/** The job view's `waiting_ranks` (docs/ranks.md, "Waiting for a pipeline"). */
export const waitingRanks = nullable({
  type: 'array',
  items: { type: 'integer', minimum: 0, maximum: MAX_RANKS - 1 },
  minItems: 1,
  uniqueItems: true,
  description:
    'With `waiting_reason` `no_worker_for_rank`: the ranks (0-based, ascending) of the ranked model the run names that no live worker allowed by the placement rule for its tier could hold now. Null otherwise.',
});

/** The catalogue's rank fields of a model (admin model, capabilities). */
export const catalogueRankFields = { ranks: nullable(ranks), middle_ranks: nullable(middleRanks) } as const;

/** All four, null for a whole model (capabilities). */
export const rankFields = { ...catalogueRankFields, ranks_available: nullable(ranksAvailable), pipelines: nullable(pipelines) } as const;

/** All four, present for a ranked model only (the OpenAI model object keeps OpenAI's shape otherwise). */
export const optionalRankFields = { ranks, middle_ranks: middleRanks, ranks_available: ranksAvailable, pipelines } as const;
