import type { Account, ApiKeyRecord, ModelRecord, Operator, RunRecord } from '../../models/types.js';
import { isTerminal } from '../../models/types.js';
import { budgetPeriod } from '../../models/pricing.js';

/** The job object of docs/api.md "Jobs"; internal fields (account, price, input) stay inside. */
export function jobView(run: RunRecord, queue: { position: number | null; waiting_reason: string | null; waiting_ranks: number[] | null } | null = null) {
  return {
    run_id: run.run_id,
    kind: run.kind,
    status: run.status,
    terminal: isTerminal(run.status),
    confidentiality: run.confidentiality,
    class: run.class,
    priority: run.priority,
    created_at: run.created_at,
    started_at: run.started_at,
    finished_at: run.finished_at,
    progress: run.progress,
    attempts: run.attempts,
    ttl_s: run.ttl_s,
    timeout_s: run.timeout_s,
    expires_at: run.expires_at,
    timeout_at: run.status === 'running' ? run.timeout_at : null,
    max_attempts: run.max_attempts,
    retry_on_timeout: run.retry_on_timeout,
    queue_position: run.status === 'queued' ? (queue?.position ?? null) : null,
    waiting_reason: run.status === 'queued' ? (queue?.waiting_reason ?? null) : null,
    waiting_ranks: run.status === 'queued' ? (queue?.waiting_ranks ?? null) : null,
    output: run.output,
    error: run.error,
    attestation: run.attestation,
    batch_id: run.batch_id ?? null,
    attempt_history: run.attempt_history,
    // Last, in the order transitionRun's status events write them (docs/jobs.md, "Cost").
    cost: { reserved: run.price, charged: run.charged ?? null },
    usage: run.usage ?? null,
  };
}

/** The 202 answer: the same bytes for the first submission and every idempotent replay. */
export function acceptedView(run: RunRecord) {
  return {
    run_id: run.run_id,
    kind: run.kind,
    status: 'queued' as const,
    confidentiality: run.confidentiality,
    class: run.class,
    priority: run.priority,
    created_at: run.created_at,
    warnings: run.warnings,
  };
}

export function accountView(a: Account, now = Date.now()) {
  const period = budgetPeriod(now);
  // What was spent in an earlier month is no part of this one's: the next charge starts it again.
  const budget = a.budget == null ? null : { monthly: a.budget, period, spent: a.spent_period === period ? (a.spent ?? 0) : 0 };
  return { id: a.id, name: a.name, credits: a.credits, reserved: a.reserved, created_at: a.created_at, budget };
}

export function apiKeyView(k: ApiKeyRecord) {
  return { id: k.id, prefix: k.prefix, name: k.name, created_at: k.created_at, revoked_at: k.revoked_at };
}

export function operatorView(o: Operator) {
  return { id: o.id, name: o.name, trust: o.trust, created_at: o.created_at };
}

/** A model of the catalogue (docs/models.md, "The catalogue"). */
export function modelView(m: ModelRecord) {
  return {
    object: 'model' as const,
    kind: m.kind,
    id: m.id,
    description: m.description,
    input_schema: m.input_schema,
    ranks: m.ranks,
    middle_ranks: m.middle_ranks,
    declared: m.declared,
    first_seen: m.first_seen,
    last_seen: m.last_seen,
    created_at: m.created_at,
    updated_at: m.updated_at,
  };
}
