import type { OperatorTrust } from '../../../models/types.js';
import { operatorView } from '../../contract/presenters.js';
import type { RouteSpec } from '../route-spec.js';
import * as S from '../../contract/schemas.js';
import type { OperatorService } from '../../services/fleet/operator-service.js';

const notFound = { 404: { description: 'No such operator' } };
/** Every operator route is behind ADMIN_TOKEN. */
const admin = (spec: Omit<RouteSpec, 'tag' | 'auth'>): RouteSpec => ({ ...spec, tag: 'admin', auth: 'admin' });

export interface OperatorRoutesOptions {
  operators: OperatorService;
}

/** The operators of the worker fleet and their trust (docs/confidentiality.md), behind ADMIN_TOKEN. */
export function operatorRoutes({ operators }: OperatorRoutesOptions): RouteSpec[] {
  return [
    admin({
      method: 'post',
      path: '/v1/admin/operators',
      operationId: 'adminCreateOperator',
      summary: 'Register a worker operator and issue its worker token',
      body: S.adminCreateOperatorBody,
      responses: { 201: { description: 'The operator and its worker token (shown once)', schema: S.adminOperatorCreated } },
      async handler(ctx) {
        const { name, trust } = ctx.state.body as { name: string; trust: OperatorTrust };
        const { operator, token } = await operators.create({ name, trust });
        ctx.status = 201;
        ctx.body = { operator: operatorView(operator), worker_token: token };
      },
    }),
    admin({
      method: 'get',
      path: '/v1/admin/operators',
      operationId: 'adminListOperators',
      summary: 'Every worker operator and its trust',
      responses: { 200: { description: 'Operators, oldest first', schema: S.operatorList } },
      async handler(ctx) {
        ctx.body = { data: (await operators.list()).map(operatorView) };
      },
    }),
    admin({
      method: 'get',
      path: '/v1/admin/operators/{operator_id}',
      operationId: 'adminGetOperator',
      summary: 'One worker operator',
      responses: { 200: { description: 'The operator', schema: S.operator }, ...notFound },
      async handler(ctx) {
        ctx.body = operatorView(await operators.get(ctx.params.operator_id));
      },
    }),
    admin({
      method: 'post',
      path: '/v1/admin/operators/{operator_id}/trust',
      operationId: 'adminSetOperatorTrust',
      summary: "Vet (trusted) or revoke (open) an operator; revoking disconnects its trusted workers on every instance at once",
      body: S.adminTrustBody,
      responses: { 200: { description: 'The operator with its new trust', schema: S.operator }, ...notFound },
      async handler(ctx) {
        const { trust } = ctx.state.body as { trust: OperatorTrust };
        ctx.body = operatorView(await operators.setTrust(ctx.params.operator_id, trust));
      },
    }),
    admin({
      method: 'post',
      path: '/v1/admin/operators/{operator_id}/worker-tokens',
      operationId: 'adminCreateOperatorWorkerToken',
      summary: 'Issue another worker token for an operator (its machines share its trust)',
      responses: { 201: { description: 'The token; shown only now', schema: S.workerTokenCreated }, ...notFound },
      async handler(ctx) {
        const { record, token } = await operators.issueWorkerToken(ctx.params.operator_id);
        ctx.status = 201;
        ctx.body = { id: record.id, worker_token: token, trust: record.trust, created_at: record.created_at };
      },
    }),
  ];
}
