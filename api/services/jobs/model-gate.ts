import { availableServing, rankCounts, workersServing, type FleetSnapshot } from '../../../dispatch/fleet-counters.js';
import { missingRanks } from '../../../dispatch/rank-placement.js';
import { ApiError, ValidationError } from '../../../models/errors.js';
import type { KindSpec } from '../../../models/kinds.js';
import { modelInputCheck, nearest } from '../../../models/model-schema.js';
import type { ModelStore } from '../../../models/stores.js';
import { DEFAULT_MIDDLE_RANKS, type InputWarning, type MiddleRanks, type RunRecord } from '../../../models/types.js';
import { routedModel } from '../../../queues/queue-names.js';

/** Why a queued run has not been leased yet, when the fleet says why (docs/models.md). */
export type WaitingReason = 'no_worker_for_kind' | 'no_worker_for_model' | 'no_worker_for_rank' | 'backend_unavailable' | 'retry_backoff' | 'concurrency_limit';

/** Why a queued run waits, and for `no_worker_for_rank` which ranks no worker could hold (0-based, ascending). */
export interface Waiting {
  reason: WaitingReason | null;
  ranks: number[] | null;
}

/** A ranked model's rank count and placement policy, as its catalogue entry holds them. */
export interface RankedEntry {
  ranks: number;
  middle_ranks: MiddleRanks;
}

/**
 * How long a model's catalogue entry read for a waiting reason is reused: a caller polling its
 * queued job costs the catalogue one read per model per this long, not one per poll; an
 * operator's redeclaration shows within it.
 */
const RANKED_CACHE_MS = 2_000;
/** Past this many cached models, the expired ones are dropped (the catalogue bounds the rest). */
const RANKED_CACHE_MAX = 1_000;

/** At most this many model ids are listed in an `unknown_model` error. */
const MAX_LISTED = 100;


export interface ModelGateOptions {
  /** The model catalogue: what a job may name (admin API and workers' advertisements). */
  catalogue: Pick<ModelStore, 'get' | 'list'>;
}

/**
 * The models side of a submission: a job naming `input.model` names a model of the catalogue,
 * and its input is checked against that model's schema (docs/models.md, "Submitting").
 */
export class ModelGate {
  private readonly entries = new Map<string, { at: number; entry: Promise<RankedEntry | null> }>();

  constructor(private readonly opts: ModelGateOptions) {}

  /** The rank count and policy of the model `run` names when the catalogue serves it in ranks; null otherwise. */
  ranked(run: Pick<RunRecord, 'kind' | 'input'>): Promise<RankedEntry | null> {
    const id = routedModel(run.input);
    if (id === null) return Promise.resolve(null);
    const key = `${run.kind}\n${id}`;
    const now = Date.now();
    const cached = this.entries.get(key);
    if (cached && now - cached.at < RANKED_CACHE_MS) return cached.entry;
    if (this.entries.size >= RANKED_CACHE_MAX) for (const [k, e] of this.entries) if (now - e.at >= RANKED_CACHE_MS) this.entries.delete(k);
    const entry = this.opts.catalogue.get(run.kind, id).then((m) => (m?.ranks ? { ranks: m.ranks, middle_ranks: m.middle_ranks ?? DEFAULT_MIDDLE_RANKS } : null));
    this.entries.set(key, { at: now, entry });
    entry.catch(() => this.entries.delete(key));
    return entry;
  }

  /**
   * Refuses an unknown model (400 `unknown_model`, the known ids in details) or an input its
   * model's schema refuses (400 `invalid_request`, each field with a "did you mean" hint);
   * returns the fields no schema names when the model publishes none.
   */
  async check(spec: KindSpec, input: Record<string, unknown>): Promise<InputWarning[]> {
    const id = routedModel(input);
    const model = id === null ? null : await this.opts.catalogue.get(spec.kind, id);
    if (id !== null && !model) throw await this.unknown(spec.kind, id);
    const { errors, warnings } = modelInputCheck(spec, model, input);
    if (errors.length > 0) {
      const prefixed = errors.map((e) => ({ path: `/input${e.path}`, message: e.message }));
      throw new ValidationError(`input for ${spec.kind} model ${id} is invalid: ${prefixed[0].path} ${prefixed[0].message}`, prefixed);
    }
    return warnings.map((w) => ({ path: `/input${w.path}`, message: w.message }));
  }

  private async unknown(kind: string, id: string): Promise<ApiError> {
    const known = (await this.opts.catalogue.list(kind)).map((m) => m.id);
    const hint = nearest(id, known);
    const listed = known.length === 0 ? 'none is known yet' : `known: ${known.slice(0, 10).join(', ')}${known.length > 10 ? ', ...' : ''}`;
    return new ApiError('unknown_model', `${kind} has no model ${JSON.stringify(id)}${hint ? ` (did you mean "${hint}"?)` : ''}; ${listed} (GET /v1/capabilities)`, {
      details: { path: '/input/model', kind, model: id, known: known.slice(0, MAX_LISTED), known_total: known.length, ...(hint ? { did_you_mean: hint } : {}) },
    });
  }
}

/**
 * Why `run` (queued) waits, from the fleet as it is now; null when some live worker could take
 * it. `backend_unavailable`: workers serve it, but every one of them reports its backend down.
 *
 * A run of a ranked model (`ranked`, its catalogue entry) waits for a pipeline instead: its
 * `ranks` are those no worker allowed by the placement rule for its tier could hold now, and
 * while any is missing that is the reason, before the kind and model checks (a rank worker of
 * the wrong tier would otherwise read as `no_worker_for_model`, and no worker at all as
 * `no_worker_for_kind`, neither saying what is missing). With every rank held it is null: the
 * rank counts leave out workers whose backend is down, so there is no `backend_unavailable`.
 */
export function waitingReason(run: Pick<RunRecord, 'kind' | 'confidentiality' | 'input'>, fleet: FleetSnapshot, ranked: RankedEntry | null = null): Waiting {
  const kind = fleet.kinds[run.kind];
  const id = routedModel(run.input);
  if (ranked && id !== null) {
    const takes = rankCounts(kind?.models[id], ranked.ranks).map((r) => r.takes);
    const missing = missingRanks(run.confidentiality, ranked.ranks, ranked.middle_ranks, takes);
    return missing.length > 0 ? { reason: 'no_worker_for_rank', ranks: missing } : { reason: null, ranks: null };
  }
  return { reason: wholeWaitingReason(run, fleet), ranks: null };
}

function wholeWaitingReason(run: Pick<RunRecord, 'kind' | 'confidentiality' | 'input'>, fleet: FleetSnapshot): WaitingReason | null {
  const kind = fleet.kinds[run.kind];
  if (!kind || workersServing(kind.by_tier, run.confidentiality) === 0) return 'no_worker_for_kind';
  const id = routedModel(run.input);
  const model = id === null ? null : kind.models[id];
  if (id !== null && (!model || workersServing(model.by_tier, run.confidentiality) === 0)) return 'no_worker_for_model';
  return availableServing(model ?? kind, run.confidentiality) === 0 ? 'backend_unavailable' : null;
}
