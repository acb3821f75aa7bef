import { findKind, type KindSpec } from '../models/kinds.js';
import { checkModelSchema } from '../models/model-schema.js';
import { MAX_WORKER_MODELS, type WorkerModels } from '../sdk/protocol/index.js';

/** A worker's model list the gateway refuses (protocol error `bad_models`), naming what is wrong. */
export class WorkerModelsError extends Error {
  readonly code = 'bad_models';
  constructor(
    message: string,
    readonly path: string,
  ) {
    super(message);
  }
}

/**
 * Checks a worker's models (already of the frame schema's shape) against what it registered:
 * each kind one it serves, ids unique per kind (so a worker serves one rank of a model at
 * most), each rank within its count, at most MAX_WORKER_MODELS in all, each input schema one
 * that extends its kind's. Returns the list without empty kinds. That a rank count is the
 * catalogue's is checked where the list is recorded (`Dispatcher.advertise`).
 */
export function checkWorkerModels(models: WorkerModels, kinds: readonly string[]): WorkerModels {
  const out: WorkerModels = {};
  let total = 0;
  for (const [kind, list] of Object.entries(models)) {
    if (!kinds.includes(kind)) throw new WorkerModelsError(`models lists ${kind}, which this worker did not register for (its kinds: ${kinds.join(', ')})`, `/models/${kind}`);
    const seen = new Set<string>();
    for (const [i, model] of list.entries()) {
      if (seen.has(model.id)) throw new WorkerModelsError(`models.${kind} lists ${model.id} twice`, `/models/${kind}/${i}/id`);
      seen.add(model.id);
      if (model.rank && model.rank.index >= model.rank.count) {
        throw new WorkerModelsError(`models.${kind}: ${model.id} is rank ${model.rank.index} of ${model.rank.count}; ranks are numbered 0 to ${model.rank.count - 1}`, `/models/${kind}/${i}/rank/index`);
      }
      if (model.input_schema !== undefined) {
        try {
          checkModelSchema(findKind(kind) as KindSpec, model.input_schema);
        } catch (err) {
          const at = (err as { path?: string }).path ?? '';
          throw new WorkerModelsError(`models.${kind}: the input schema of ${model.id} is refused: ${(err as Error).message}`, `/models/${kind}/${i}/input_schema${at === '/' ? '' : at}`);
        }
      }
    }
    total += list.length;
    if (list.length > 0) out[kind] = list;
  }
  if (total > MAX_WORKER_MODELS) throw new WorkerModelsError(`a worker may list at most ${MAX_WORKER_MODELS} models, this one lists ${total}`, '/models');
  return out;
}
