import type { TrustEnforcer } from '../../../dispatch/trust-enforcer.js';
import { NotFoundError } from '../../../models/errors.js';
import type { OperatorStore, WorkerTokenStore } from '../../../models/stores.js';
import type { Operator, OperatorTrust, WorkerTokenRecord } from '../../../models/types.js';
import { issueWorkerToken } from './worker-tokens.js';

const OPERATOR_ID = /^op_[0-9A-HJKMNP-TV-Z]{26}$/;

export interface OperatorServiceOptions {
  operators: OperatorStore;
  workerTokens: WorkerTokenStore;
  /** Tells every instance an operator's trust changed: each closes the workers it demotes. */
  trust: Pick<TrustEnforcer, 'announce'>;
}

/** The operators of the worker fleet, their trust and their worker tokens (docs/confidentiality.md). */
export class OperatorService {
  constructor(private readonly opts: OperatorServiceOptions) {}

  /** Registers an operator and issues its first worker token, shown only now. */
  async create(input: { name: string; trust: OperatorTrust }): Promise<{ operator: Operator; token: string }> {
    const operator = await this.opts.operators.create(input);
    const { token } = await issueWorkerToken(this.opts.workerTokens, { type: 'operator', id: operator.id }, input.trust);
    return { operator, token };
  }

  /** Every operator, oldest first. */
  list(): Promise<Operator[]> {
    return this.opts.operators.list();
  }

  async get(operatorId: string): Promise<Operator> {
    // A malformed id is looked up nowhere: it is simply not an operator.
    return found(OPERATOR_ID.test(operatorId) ? await this.opts.operators.get(operatorId) : null);
  }

  /** Vets (trusted) or revokes (open) an operator; its workers on every instance follow at once. */
  async setTrust(operatorId: string, trust: OperatorTrust): Promise<Operator> {
    const operator = found(OPERATOR_ID.test(operatorId) ? await this.opts.operators.setTrust(operatorId, trust) : null);
    // Announced whatever the change (even none): each instance compares its workers with the
    // stored trust, so repeating a revocation is also how to re-apply one an instance missed.
    await this.opts.trust.announce(operator.id);
    return operator;
  }

  /** Another worker token for the operator, shown only now: its machines share its trust. */
  async issueWorkerToken(operatorId: string): Promise<{ record: WorkerTokenRecord; token: string }> {
    const operator = await this.get(operatorId);
    return issueWorkerToken(this.opts.workerTokens, { type: 'operator', id: operator.id }, operator.trust);
  }
}

function found(operator: Operator | null): Operator {
  if (!operator) throw new NotFoundError('operator');
  return operator;
}
