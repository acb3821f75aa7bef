import { collectDefaultMetrics, Counter, Histogram, Registry } from 'prom-client';
import type { DispatchObserver, LeaseLossReason, PipelineEnd } from '../../../dispatch/dispatch-observer.js';
import { LEASE_LOSS_REASONS, PIPELINE_ENDS } from '../../../dispatch/dispatch-observer.js';
import { isTerminal, type RunRecord } from '../../../models/types.js';
import { KIND_NAMES, TIERS, type Tier } from '../../../models/kinds.js';
import type { WebhookOutcome } from '../../../sdk/client/types.js';
import {
  DISPATCH_SECONDS_BUCKETS,
  HTTP_SECONDS_BUCKETS,
  JOB_SECONDS_BUCKETS,
  TERMINAL_LABELS,
  TOOL_OUTCOMES,
  WEBHOOK_OUTCOMES,
  kindLabel,
  methodLabel,
  statusClass,
} from './metric-labels.js';
import { registerLiveGauges, type LiveSources } from './live-gauges.js';

type KindTier = 'kind' | 'tier';
const REPLICA_STEPS = ['accept', 'settle'] as const;
export type ReplicaStep = (typeof REPLICA_STEPS)[number];
type Terminal = (typeof TERMINAL_LABELS)[number];

const seconds = (from: string, to: string) => Math.max(0, (Date.parse(to) - Date.parse(from)) / 1000);

/**
 * Every metric of one gateway process (docs/operations.md, "Metrics"), on its own registry so
 * two gateways in one process (tests, `switchyard dev`) never share or collide. Services get
 * this object (or a narrow view of it) in their options and call its hooks; gauges of live
 * state are computed when Prometheus scrapes.
 */
export class GatewayMetrics implements DispatchObserver {
  readonly registry = new Registry();
  private readonly http: Histogram<'method' | 'route' | 'status_class'>;
  private readonly submitted: Counter<KindTier>;
  private readonly terminal: Record<Terminal, Counter<KindTier>>;
  private readonly waitSeconds: Histogram<KindTier>;
  private readonly runSeconds: Histogram<KindTier | 'status'>;
  private readonly dispatchLatency: Histogram<KindTier>;
  private readonly leasesLost: Counter<'reason'>;
  private readonly requeuedRuns: Counter<KindTier>;
  private readonly webhookDeliveries: Counter<'outcome'>;
  private readonly toolCalls: Counter<'outcome'>;
  private readonly creditsReserved: Counter<'kind'>;
  private readonly creditsCharged: Counter<'kind'>;
  private readonly pipelinesFormed: Counter<KindTier>;
  private readonly pipelinesEnded: Counter<'end'>;
  private readonly pipelineBytes: Counter<'path'>;
  private readonly replicaWaits: Histogram<'step'>;
  private readonly replicaShortfalls: Counter<'step'>;

  constructor() {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });
    const counter = <L extends string>(name: string, help: string, labelNames: readonly L[]) => new Counter<L>({ name, help, labelNames, registers });
    const histogram = <L extends string>(name: string, help: string, labelNames: readonly L[], buckets: number[]) =>
      new Histogram<L>({ name, help, labelNames, buckets, registers });

    this.http = histogram('switchyard_http_request_duration_seconds', 'HTTP requests by route template (unmatched: no route) and status class', ['method', 'route', 'status_class'], HTTP_SECONDS_BUCKETS);
    this.submitted = counter('switchyard_jobs_submitted_total', 'New runs accepted (idempotent replays not counted)', ['kind', 'tier']);
    this.terminal = {
      succeeded: counter('switchyard_jobs_succeeded_total', 'Runs that ended succeeded', ['kind', 'tier']),
      failed: counter('switchyard_jobs_failed_total', 'Runs that ended failed', ['kind', 'tier']),
      canceled: counter('switchyard_jobs_canceled_total', 'Runs that ended canceled', ['kind', 'tier']),
    };
    this.waitSeconds = histogram('switchyard_job_wait_seconds', 'Run created to its first lease', ['kind', 'tier'], JOB_SECONDS_BUCKETS);
    this.runSeconds = histogram('switchyard_job_run_seconds', 'First lease to the end of a run', ['kind', 'tier', 'status'], JOB_SECONDS_BUCKETS);
    this.dispatchLatency = histogram('switchyard_dispatch_latency_seconds', 'Job fetched from its queue to lease frame sent', ['kind', 'tier'], DISPATCH_SECONDS_BUCKETS);
    this.leasesLost = counter('switchyard_leases_lost_total', 'Leases lost before their worker reported an end', ['reason']);
    this.requeuedRuns = counter('switchyard_jobs_requeued_total', 'Runs sent back to their queue to run again', ['kind', 'tier']);
    this.webhookDeliveries = counter('switchyard_webhook_deliveries_total', 'Webhook delivery attempts made by this process, by outcome', ['outcome']);
    this.toolCalls = counter('switchyard_tool_calls_total', 'Custom tool calls, by outcome', ['outcome']);
    this.creditsReserved = counter('switchyard_credits_reserved_total', 'Credits reserved by new runs at submission', ['kind']);
    this.creditsCharged = counter('switchyard_credits_charged_total', 'Credits charged for runs that succeeded', ['kind']);
    this.pipelinesFormed = counter('switchyard_pipelines_formed_total', "Ranked models' jobs leased as pipelines by this instance", ['kind', 'tier']);
    this.pipelinesEnded = counter('switchyard_pipelines_ended_total', 'Pipelines ended by this instance, by how: finished, failed, lost, canceled, not_formed', ['end']);
    this.pipelineBytes = counter('switchyard_pipeline_forwarded_bytes_total', 'Activation frame bytes this instance sent on to a rank here (local) or to another instance', ['path']);
    this.replicaWaits = histogram('switchyard_redis_replica_wait_seconds', 'REDIS_WAIT_REPLICAS: how long an accept or a settle waited for its writes to reach the replicas', ['step'], DISPATCH_SECONDS_BUCKETS);
    this.replicaShortfalls = counter('switchyard_redis_replica_shortfalls_total', 'Accepts and settles answered with fewer replicas than REDIS_WAIT_REPLICAS holding their writes (WAIT timed out or failed)', ['step']);
    this.zeroCounters();
  }

  /**
   * Adds the gauges of live state, read from `src` at each scrape. Called once the parts they
   * read exist (the dispatcher, the SSE streams, the socket servers).
   */
  watch(src: LiveSources): void {
    registerLiveGauges([this.registry], src);
  }

  /** The content type of `exposition()` (Prometheus text format 0.0.4). */
  get contentType(): string {
    return this.registry.contentType;
  }

  exposition(): Promise<string> {
    return this.registry.metrics();
  }

  /** One answered HTTP request; `route` is a route template or `unmatched`, never a raw path. */
  observeRequest(method: string, route: string, status: number, durationSeconds: number): void {
    this.http.observe({ method: methodLabel(method), route, status_class: statusClass(status) }, durationSeconds);
  }

  /** A new run was accepted (not an idempotent replay): its price is now reserved. */
  runSubmitted(run: Pick<RunRecord, 'kind' | 'confidentiality' | 'price'>): void {
    const kind = kindLabel(run.kind);
    this.submitted.inc({ kind, tier: run.confidentiality });
    this.creditsReserved.inc({ kind }, run.price);
  }

  /**
   * The run store's status hook: it runs once per status change, in the process that made it,
   * so a run's end (and its charge) is counted once across the fleet.
   */
  readonly statusChanged = (run: RunRecord): void => {
    const labels = { kind: kindLabel(run.kind), tier: run.confidentiality };
    // A requeued run's later leases are not waits from creation; only the first lease is.
    if (run.status === 'running' && run.attempts === 1 && run.started_at) this.waitSeconds.observe(labels, seconds(run.created_at, run.started_at));
    if (!isTerminal(run.status)) return;
    const status = run.status as Terminal;
    this.terminal[status].inc(labels);
    if (status === 'succeeded') this.creditsCharged.inc({ kind: labels.kind }, run.charged ?? run.price);
    if (run.started_at && run.finished_at) this.runSeconds.observe({ ...labels, status }, seconds(run.started_at, run.finished_at));
  };

  leaseSent(kind: string, tier: Tier, durationSeconds: number): void {
    this.dispatchLatency.observe({ kind: kindLabel(kind), tier }, durationSeconds);
  }

  leaseLost(reason: LeaseLossReason): void {
    this.leasesLost.inc({ reason });
  }

  requeued(kind: string, tier: Tier): void {
    this.requeuedRuns.inc({ kind: kindLabel(kind), tier });
  }

  pipelineFormed(kind: string, tier: Tier): void {
    this.pipelinesFormed.inc({ kind: kindLabel(kind), tier });
  }

  pipelineEnded(end: PipelineEnd): void {
    this.pipelinesEnded.inc({ end });
  }

  framesForwarded(path: 'local' | 'instance', bytes: number): void {
    this.pipelineBytes.inc({ path }, bytes);
  }

  /** One accept or settle's wait for its replicas (REDIS_WAIT_REPLICAS), and whether enough acknowledged. */
  replicaWait(step: ReplicaStep, durationSeconds: number, enough: boolean): void {
    this.replicaWaits.observe({ step }, durationSeconds);
    if (!enough) this.replicaShortfalls.inc({ step });
  }

  webhookAttempt(outcome: WebhookOutcome): void {
    this.webhookDeliveries.inc({ outcome });
  }

  toolCall(ok: boolean): void {
    this.toolCalls.inc({ outcome: ok ? 'ok' : 'failed' });
  }

  /**
   * Every counter starts at 0 for each of its label sets, so `rate()` and `increase()` see the
   * first event rather than a series appearing out of nowhere (all label sets are small, fixed).
   */
  private zeroCounters(): void {
    for (const kind of KIND_NAMES) {
      this.creditsReserved.inc({ kind }, 0);
      this.creditsCharged.inc({ kind }, 0);
      for (const tier of TIERS) {
        for (const c of [this.submitted, this.requeuedRuns, this.pipelinesFormed, ...Object.values(this.terminal)]) c.inc({ kind, tier }, 0);
      }
    }
    for (const reason of LEASE_LOSS_REASONS) this.leasesLost.inc({ reason }, 0);
    for (const end of PIPELINE_ENDS) this.pipelinesEnded.inc({ end }, 0);
    for (const path of ['local', 'instance']) this.pipelineBytes.inc({ path }, 0);
    for (const outcome of WEBHOOK_OUTCOMES) this.webhookDeliveries.inc({ outcome }, 0);
    for (const outcome of TOOL_OUTCOMES) this.toolCalls.inc({ outcome }, 0);
    for (const step of REPLICA_STEPS) this.replicaShortfalls.inc({ step }, 0);
  }
}
