import { modelView } from '../../contract/presenters.js';
import * as M from '../../contract/model-schemas.js';
import type { ModelCatalogue, ModelDeclaration } from '../../services/fleet/model-catalogue.js';
import type { RouteSpec } from '../route-spec.js';

const notFound = { 404: { description: 'No such model of that kind' } };
/** Every catalogue route is behind ADMIN_TOKEN. */
const admin = (spec: Omit<RouteSpec, 'tag' | 'auth'>): RouteSpec => ({ ...spec, tag: 'admin', auth: 'admin' });

export interface ModelRoutesOptions {
  models: ModelCatalogue;
}

/**
 * The model catalogue for operators (docs/models.md): every model workers advertised, and
 * declarations ahead of any worker. Model ids may hold `/` and `:`, so the path segment is
 * URL-encoded (`meta-llama%2FLlama-3.1-8B-Instruct`); the router decodes it.
 */
export function modelRoutes({ models }: ModelRoutesOptions): RouteSpec[] {
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
        ctx.body = { data: (await models.list(ctx.query.kind as string | undefined)).map(modelView) };
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
        const { record, created } = await models.declare(ctx.params.kind, ctx.params.model, ctx.state.body as ModelDeclaration);
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
        ctx.body = modelView(await models.get(ctx.params.kind, ctx.params.model));
      },
    }),
    admin({
      method: 'delete',
      path,
      operationId: 'adminDeleteModel',
      summary: 'Forget a model; a worker advertising it again brings it back, undeclared',
      responses: { 204: { description: 'Forgotten', mediaType: 'none' }, ...notFound },
      async handler(ctx) {
        await models.remove(ctx.params.kind, ctx.params.model);
        ctx.status = 204;
      },
    }),
  ];
}
