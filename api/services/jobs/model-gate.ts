import { availableServing, workersServing, type FleetSnapshot } from '../../../dispatch/fleet-counters.js';
import { ApiError, ValidationError } from '../../../models/errors.js';
import type { KindSpec } from '../../../models/kinds.js';
import { modelInputCheck, nearest } from '../../../models/model-schema.js';
import type { ModelStore } from '../../../models/stores.js';
import type { InputWarning, RunRecord } from '../../../models/types.js';
import { routedModel } from '../../../queues/queue-names.js';

/** Why a queued run has not been leased yet, when the fleet says why (docs/models.md). */
export type WaitingReason = 'no_worker_for_kind' | 'no_worker_for_model' | 'backend_unavailable' | 'retry_backoff';

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
  constructor(private readonly opts: ModelGateOptions) {}

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
 */
export function waitingReason(run: Pick<RunRecord, 'kind' | 'confidentiality' | 'input'>, fleet: FleetSnapshot): WaitingReason | null {
  const kind = fleet.kinds[run.kind];
  if (!kind || workersServing(kind.by_tier, run.confidentiality) === 0) return 'no_worker_for_kind';
  const id = routedModel(run.input);
  const model = id === null ? null : kind.models[id];
  if (id !== null && (!model || workersServing(model.by_tier, run.confidentiality) === 0)) return 'no_worker_for_model';
  return availableServing(model ?? kind, run.confidentiality) === 0 ? 'backend_unavailable' : null;
}
