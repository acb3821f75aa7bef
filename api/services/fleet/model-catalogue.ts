import { ApiError, NotFoundError } from '../../../models/errors.js';
import { KIND_NAMES, findKind, type KindSpec } from '../../../models/kinds.js';
import { checkModelSchema } from '../../../models/model-schema.js';
import type { ModelStore } from '../../../models/stores.js';
import { DEFAULT_MIDDLE_RANKS, type MiddleRanks, type ModelRecord } from '../../../models/types.js';
import { MODEL_ID_PATTERN } from '../../../sdk/protocol/limits.js';

const MODEL_ID = new RegExp(MODEL_ID_PATTERN);

/** What an operator declares of a model; the kind and id are its address. */
export interface ModelDeclaration {
  description?: string | null;
  input_schema?: Record<string, unknown> | null;
  /** Served in this many ranks (pipeline stages); absent or null: whole (docs/ranks.md). */
  ranks?: number | null;
  /** Ranked models: who may hold the middle ranks of trusted jobs. @defaultValue 'trusted' */
  middle_ranks?: MiddleRanks | null;
}

export interface ModelCatalogueOptions {
  models: Pick<ModelStore, 'declare' | 'get' | 'list' | 'remove'>;
}

/**
 * The model catalogue as operators manage it (docs/models.md): every model workers advertised,
 * and declarations ahead of any worker. A kind or model id that cannot exist is looked up
 * nowhere: such a model is simply not there.
 */
export class ModelCatalogue {
  constructor(private readonly opts: ModelCatalogueOptions) {}

  /** Every model of `kind` (`unknown_kind` for a kind there is not), or of every kind; by kind then id. */
  list(kind?: string): Promise<ModelRecord[]> {
    if (kind !== undefined) knownKind(kind);
    return this.opts.models.list(kind);
  }

  async get(kind: string, id: string): Promise<ModelRecord> {
    const record = findKind(kind) && MODEL_ID.test(id) ? await this.opts.models.get(kind, id) : null;
    if (!record) throw new NotFoundError('model');
    return record;
  }

  /**
   * Declares a model, or replaces its declaration (workers then only refresh when it was seen).
   * 400 for an unknown kind, a malformed id (`invalid_request`), `middle_ranks` without `ranks`
   * (`invalid_request`) or an input schema the kind cannot take (`invalid_schema`, its place in
   * `details.path`). The rank count and placement become the catalogue's: rank workers that
   * advertise another count are refused from their next advertisement (docs/ranks.md).
   */
  async declare(kindName: string, id: string, declaration: ModelDeclaration): Promise<{ record: ModelRecord; created: boolean }> {
    const kind = knownKind(kindName);
    if (!MODEL_ID.test(id)) {
      throw new ApiError('invalid_request', `invalid model id ${JSON.stringify(id)}: 1-200 letters, digits and ._:/@+-, starting with a letter or digit`, {
        details: { pattern: MODEL_ID_PATTERN },
      });
    }
    const inputSchema = declaration.input_schema ?? null;
    if (inputSchema !== null) checkModelSchema(kind, inputSchema);
    const ranks = declaration.ranks ?? null;
    // A placement policy for ranks a model does not have would be silently meaningless.
    if (ranks === null && declaration.middle_ranks != null) {
      throw new ApiError('invalid_request', 'middle_ranks is for ranked models: declare ranks too, or leave middle_ranks out', { details: { path: '/middle_ranks' } });
    }
    const rankFields = ranks === null ? { ranks: null, middle_ranks: null } : { ranks, middle_ranks: declaration.middle_ranks ?? DEFAULT_MIDDLE_RANKS };
    return this.opts.models.declare({ kind: kind.kind, id, description: declaration.description ?? null, input_schema: inputSchema, ...rankFields }, new Date().toISOString());
  }

  /** Forgets a model; a worker advertising it again brings it back, undeclared. */
  async remove(kind: string, id: string): Promise<void> {
    const removed = findKind(kind) && MODEL_ID.test(id) ? await this.opts.models.remove(kind, id) : false;
    if (!removed) throw new NotFoundError('model');
  }
}

function knownKind(kind: string): KindSpec {
  const spec = findKind(kind);
  if (!spec) throw new ApiError('unknown_kind', `unknown kind ${JSON.stringify(kind)}`, { details: { kinds: KIND_NAMES } });
  return spec;
}
