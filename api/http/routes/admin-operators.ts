import { NotFoundError } from '../../../models/errors.js';
import type { Operator, OperatorTrust } from '../../../models/types.js';
import type { Ctx } from '../context.js';
import { operatorView } from '../../contract/presenters.js';
import type { RouteSpec } from '../route-spec.js';
import * as S from '../../contract/schemas.js';
import type { Services } from '../services.js';
import { issueWorkerToken } from '../../services/fleet/worker-tokens.js';

const OPERATOR_ID = /^op_[0-9A-HJKMNP-TV-Z]{26}$/;
const notFound = { 404: { description: 'No such operator' } };
/** Every operator route is behind ADMIN_TOKEN. */
const admin = (spec: Omit<RouteSpec, 'tag' | 'auth'>): RouteSpec => ({ ...spec, tag: 'admin', auth: 'admin' });

/** The operators of the worker fleet and their trust (docs/confidentiality.md), behind ADMIN_TOKEN. */
export function operatorRoutes(s: Services): RouteSpec[] {
  const found = (operator: Operator | null): Operator => {
    if (!operator) throw new NotFoundError('operator');
    return operator;
  };
  // A malformed id is looked up nowhere: it is simply not an operator.
  const load = async (ctx: Ctx): Promise<Operator> => found(OPERATOR_ID.test(ctx.params.operator_id) ? await s.stores.operators.get(ctx.params.operator_id) : null);
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
        const operator = await s.stores.operators.create({ name, trust });
        const { token } = await issueWorkerToken(s.stores.workerTokens, { type: 'operator', id: operator.id }, trust);
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
        ctx.body = { data: (await s.stores.operators.list()).map(operatorView) };
      },
    }),
    admin({
      method: 'get',
      path: '/v1/admin/operators/{operator_id}',
      operationId: 'adminGetOperator',
      summary: 'One worker operator',
      responses: { 200: { description: 'The operator', schema: S.operator }, ...notFound },
      async handler(ctx) {
        ctx.body = operatorView(await load(ctx));
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
        const id = ctx.params.operator_id;
        const operator = found(OPERATOR_ID.test(id) ? await s.stores.operators.setTrust(id, trust) : null);
        // Announced whatever the change (even none): each instance compares its workers with the
        // stored trust, so repeating a revocation is also how to re-apply one an instance missed.
        await s.trust.announce(operator.id);
        ctx.body = operatorView(operator);
      },
    }),
    admin({
      method: 'post',
      path: '/v1/admin/operators/{operator_id}/worker-tokens',
      operationId: 'adminCreateOperatorWorkerToken',
      summary: 'Issue another worker token for an operator (its machines share its trust)',
      responses: { 201: { description: 'The token; shown only now', schema: S.workerTokenCreated }, ...notFound },
      async handler(ctx) {
        const operator = await load(ctx);
        const { record, token } = await issueWorkerToken(s.stores.workerTokens, { type: 'operator', id: operator.id }, operator.trust);
        ctx.status = 201;
        ctx.body = { id: record.id, worker_token: token, trust: record.trust, created_at: record.created_at };
      },
    }),
  ];
}
