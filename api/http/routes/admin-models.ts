import { ApiError, NotFoundError } from '../../../models/errors.js';
import { KIND_NAMES, findKind, type KindSpec } from '../../../models/kinds.js';
import { checkModelSchema } from '../../../models/model-schema.js';
import { MODEL_ID_PATTERN } from '../../../sdk/protocol/limits.js';
import type { Ctx } from '../context.js';
import { modelView } from '../../contract/presenters.js';
import * as M from '../../contract/model-schemas.js';
import type { RouteSpec } from '../route-spec.js';
import type { Services } from '../services.js';

const MODEL_ID = new RegExp(MODEL_ID_PATTERN);
const notFound = { 404: { description: 'No such model of that kind' } };
/** Every catalogue route is behind ADMIN_TOKEN. */
const admin = (spec: Omit<RouteSpec, 'tag' | 'auth'>): RouteSpec => ({ ...spec, tag: 'admin', auth: 'admin' });

function knownKind(kind: string): KindSpec {
  const spec = findKind(kind);
  if (!spec) throw new ApiError('unknown_kind', `unknown kind ${JSON.stringify(kind)}`, { details: { kinds: KIND_NAMES } });
  return spec;
}

/**
 * The model catalogue for operators (docs/models.md): every model workers advertised, and
 * declarations ahead of any worker. Model ids may hold `/` and `:`, so the path segment is
 * URL-encoded (`meta-llama%2FLlama-3.1-8B-Instruct`); the router decodes it.
 */
export function modelRoutes(s: Services): RouteSpec[] {
  // A path naming an unknown kind or a malformed id is looked up nowhere: it is simply not a model.
  const load = async (ctx: Ctx) => {
    const { kind, model } = ctx.params;
    const record = findKind(kind) && MODEL_ID.test(model) ? await s.stores.models.get(kind, model) : null;
    if (!record) throw new NotFoundError('model');
    return record;
  };
  const path = '/v1/admin/models/{kind}/{model}';
  return [
    admin({
      method: 'get',
      path: '/v1/admin/models',
      operationId: 'adminListModels',
      summary: 'The model catalogue: every model advertised or declared, by kind then id',
      query: M.listModelsQuery,
      responses: { 200: { description: 'Models, ordered by kind then id', schema: M.modelList } },
      async handler(ctx) {
        const kind = ctx.query.kind as string | undefined;
        if (kind !== undefined) knownKind(kind);
        ctx.body = { data: (await s.stores.models.list(kind)).map(modelView) };
      },
    }),
    admin({
      method: 'put',
      path,
      operationId: 'adminDeclareModel',
      summary: 'Declare a model ahead of any worker, or replace its declaration (workers then only refresh when it was seen)',
      body: M.declareModelBody,
      responses: {
        200: { description: 'Its declaration replaced', schema: M.model },
        201: { description: 'Declared', schema: M.model },
        400: { description: '`unknown_kind`, an invalid model id (`invalid_request`), or `invalid_schema` with the place in `details.path`' },
      },
      async handler(ctx) {
        const kind = knownKind(ctx.params.kind);
        const id = ctx.params.model;
        if (!MODEL_ID.test(id)) {
          throw new ApiError('invalid_request', `invalid model id ${JSON.stringify(id)}: 1-200 letters, digits and ._:/@+-, starting with a letter or digit`, {
            details: { pattern: MODEL_ID_PATTERN },
          });
        }
        const body = ctx.state.body as { description?: string | null; input_schema?: Record<string, unknown> | null };
        const inputSchema = body.input_schema ?? null;
        if (inputSchema !== null) checkModelSchema(kind, inputSchema);
        const { record, created } = await s.stores.models.declare(
          { kind: kind.kind, id, description: body.description ?? null, input_schema: inputSchema },
          new Date().toISOString(),
        );
        ctx.status = created ? 201 : 200;
        ctx.body = modelView(record);
      },
    }),
    admin({
      method: 'get',
      path,
      operationId: 'adminGetModel',
      summary: 'One model of the catalogue',
      responses: { 200: { description: 'The model', schema: M.model }, ...notFound },
      async handler(ctx) {
        ctx.body = modelView(await load(ctx));
      },
    }),
    admin({
      method: 'delete',
      path,
      operationId: 'adminDeleteModel',
      summary: 'Forget a model; a worker advertising it again brings it back, undeclared',
      responses: { 204: { description: 'Forgotten', mediaType: 'none' }, ...notFound },
      async handler(ctx) {
        const { kind, model } = ctx.params;
        const removed = findKind(kind) && MODEL_ID.test(model) ? await s.stores.models.remove(kind, model) : false;
        if (!removed) throw new NotFoundError('model');
        ctx.status = 204;
      },
    }),
  ];
}
