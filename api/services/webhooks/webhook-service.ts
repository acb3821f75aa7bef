import { UnrecoverableError, type Job } from 'bullmq';
import type { Logger } from 'pino';
import { ApiError } from '../../../models/errors.js';
import type { AccountStore, RunStore } from '../../../models/stores.js';
import type { RunEventLog } from '../../../models/run-event-log.js';
import { isTerminal, type RunRecord, type WebhookEvent, type WebhookSecret } from '../../../models/types.js';
import type { WebhookJobData, WebhookQueue } from '../../../queues/webhook-queue.js';
import { OutboundError, type SsrfGuard } from '../outbound/ssrf-guard.js';
import { jobView } from '../../contract/presenters.js';
import type { WebhookAttempt, WebhookOutcome } from '../../../sdk/client/types.js';
import type { WebhookAttemptLog } from './attempt-log.js';
import type { GatewayMetrics } from '../metrics/gateway-metrics.js';
import { mintWebhookSecret, signWebhook } from './signing.js';
import { StreamWebhooks, type StreamEvent } from './stream-webhooks.js';

export const WEBHOOK_USER_AGENT = 'Switchyard-Webhooks/1';

const EVENT_TYPES: Record<'start' | 'completed', string> = { start: 'job.started', completed: 'job.completed' };

export interface WebhookServiceOptions {
  queue: WebhookQueue;
  attempts: WebhookAttemptLog;
  accounts: AccountStore;
  outbound: Pick<SsrfGuard, 'request'>;
  log: Logger;
  /** Counts attempts by outcome. */
  metrics?: Pick<GatewayMetrics, 'webhookAttempt'>;
  /** `output` and `logs`: the run's webhook settings, and what it logged since the last delivery. */
  runs: Pick<RunStore, 'get'>;
  eventLog: Pick<RunEventLog, 'claim'>;
  /** `output` and `logs` are delivered at most once per run per this. @defaultValue 500 */
  streamWindowMs?: number;
}

/**
 * Webhooks of runs: queued when a run starts (if its filter asks) and when it ends, POSTed by
 * the webhook queue's worker through the SSRF guard, signed per Standard Webhooks with the
 * account's secret, every attempt logged for `GET /v1/jobs/{run_id}/webhooks`. docs/webhooks.md.
 */
export class WebhookService {
  private readonly stream: StreamWebhooks;

  constructor(private readonly opts: WebhookServiceOptions) {
    this.stream = new StreamWebhooks({ queue: opts.queue, runs: opts.runs, eventLog: opts.eventLog, windowMs: opts.streamWindowMs, log: opts.log });
  }

  /** A worker's report of a run (streamed text, a log line): its `output` or `logs` webhook, coalesced. */
  readonly reported = (runId: string, event: StreamEvent): void => this.stream.reported(runId, event);

  /**
   * The status-change hook: queues the delivery this change calls for, at most once per run
   * and event. Never throws (the change has happened); a failed enqueue is logged.
   */
  readonly statusChanged = async (run: RunRecord): Promise<void> => {
    this.stream.statusChanged(run);
    if (!run.webhook) return;
    const event: 'start' | 'completed' | null = run.status === 'running' ? 'start' : isTerminal(run.status) ? 'completed' : null;
    if (!event || !run.webhook_events_filter.includes(event)) return;
    const data: WebhookJobData = {
      run_id: run.run_id,
      account_id: run.account_id,
      event,
      url: run.webhook,
      webhook_id: `msg_${run.run_id}_${event}`,
      payload: { type: EVENT_TYPES[event], timestamp: new Date().toISOString(), data: jobView(run) },
    };
    try {
      await this.opts.queue.add(data);
    } catch (err) {
      this.opts.log.error({ err, runId: run.run_id, event }, 'could not queue a webhook delivery');
    }
  };

  /** The account's signing secret, created on first use. */
  secret(accountId: string): Promise<WebhookSecret> {
    return this.opts.accounts.webhookSecret(accountId, mintWebhookSecret());
  }

  /** A new signing secret; every later attempt, retries of earlier events included, is signed with it. */
  rotateSecret(accountId: string): Promise<WebhookSecret> {
    return this.opts.accounts.setWebhookSecret(accountId, mintWebhookSecret());
  }

  attemptsOf(runId: string): Promise<WebhookAttempt[]> {
    return this.opts.attempts.list(runId);
  }

  /**
   * One attempt (the webhook queue's processor). A 2xx answer delivers; any other answer
   * (redirects are never followed), a timeout, a refused address or a network error fails the
   * attempt, and the throw makes BullMQ retry it on the schedule; a 410 Gone stops the retries.
   */
  readonly deliver = async (job: Job<WebhookJobData>): Promise<void> => {
    let d = job.data;
    if (!d.payload) {
      // An `output` or `logs` delivery: built now, kept for its retries; nothing new, nothing sent.
      const payload = await this.stream.build(d);
      if (!payload) return;
      d = { ...d, payload };
      await job.updateData(d);
    }
    const attempt = job.attemptsMade + 1;
    const started = Date.now();
    let status: number | null = null;
    let error: string | null = null;
    try {
      const { secret } = await this.secret(d.account_id);
      const body = JSON.stringify(d.payload);
      const timestamp = Math.floor(started / 1000);
      const res = await this.opts.outbound.request(d.url, {
        method: 'POST',
        body,
        headers: {
          'content-type': 'application/json',
          'user-agent': WEBHOOK_USER_AGENT,
          'webhook-id': d.webhook_id,
          'webhook-timestamp': String(timestamp),
          'webhook-signature': signWebhook(secret, d.webhook_id, timestamp, body),
        },
      });
      status = res.status;
    } catch (err) {
      if (err instanceof OutboundError || err instanceof ApiError) error = err.code;
      else {
        error = 'internal';
        this.opts.log.warn({ err, runId: d.run_id, event: d.event }, 'webhook attempt failed inside the gateway');
      }
    }

    const delivered = status !== null && status >= 200 && status < 300;
    const lastAttempt = attempt >= (job.opts.attempts ?? 1);
    const outcome: WebhookOutcome = delivered ? 'delivered' : status === 410 ? 'failed' : lastAttempt ? 'gave_up' : 'retrying';
    this.opts.metrics?.webhookAttempt(outcome);
    const nextAt = outcome === 'retrying' ? new Date(Date.now() + this.opts.queue.retryDelayMs(attempt)).toISOString() : null;
    await this.opts.attempts
      .record(d.run_id, {
        webhook_id: d.webhook_id,
        event: d.event,
        url: d.url,
        attempt,
        at: new Date(started).toISOString(),
        status_code: status,
        error,
        duration_ms: Date.now() - started,
        outcome,
        next_attempt_at: nextAt,
      })
      // The log is for people; a lost line must not turn a delivered attempt into a retry.
      .catch((err) => this.opts.log.warn({ err, runId: d.run_id }, 'could not log a webhook attempt'));

    if (delivered) return;
    const why = status !== null ? `the receiver answered ${status}` : `the call failed: ${error}`;
    if (outcome === 'failed') throw new UnrecoverableError(`${why}; 410 Gone stops the retries`);
    throw new Error(why);
  };
}
