import { KINDS, fileFields } from '../../models/kinds.js';
import { kindInputs } from '../helpers/kind-inputs.js';
import { SseClient } from '../helpers/sse-client.js';
import type { SoakEnvironment } from './soak-environment.js';

export interface LoadOptions {
  /** Jobs submitted per second (while fewer than `maxInFlight` are unfinished). */
  jobsPerSecond: number;
  maxInFlight: number;
  /** Seconds between two streamed chat completions. */
  chatEverySeconds: number;
  /** How long a finished job's output files stay usable as inputs (under the artifact retention). */
  reuseOutputsForMs: number;
}

export interface LoadCounts {
  submitted: number;
  succeeded: number;
  /** Jobs that ended otherwise, requests answered with an error, followers that broke. */
  errors: number;
  followedBySse: number;
  followedByWebhook: number;
  followedByPolling: number;
  /** File inputs taken from an earlier job's output rather than a data: URI. */
  inputsFromOutputs: number;
  chatStreams: number;
  byKind: Record<string, number>;
}

const TERMINAL = new Set(['succeeded', 'failed', 'canceled']);
/** How long one job may take from submission to its end before the soak counts it as an error. */
const JOB_DEADLINE_MS = 60_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The soak's mixed load, as callers make it: every kind in turn (models/kinds.ts), file inputs
 * from earlier outputs when there are fresh ones (artifact URLs of the account's runs) or small
 * data: URIs, each job followed one of three ways in turn (an SSE stream to `done`, a webhook
 * delivered to the local receiver with every event, polling), and a streamed chat completion
 * (`POST /v1/chat/completions`, `stream: true`) every few seconds. Every follower ends, so
 * nothing in the soak process itself piles up.
 */
export class SoakLoad {
  readonly counts: LoadCounts = { submitted: 0, succeeded: 0, errors: 0, followedBySse: 0, followedByWebhook: 0, followedByPolling: 0, inputsFromOutputs: 0, chatStreams: 0, byKind: {} };
  /** The first few errors, for the report. */
  readonly errorSamples: string[] = [];
  private running = false;
  private inFlight = new Set<Promise<void>>();
  private loops: Promise<void>[] = [];
  private inputs: Record<string, Record<string, unknown>> = {};
  /** The freshest output URL of each content type, and when it was made. */
  private readonly outputs = new Map<string, { url: string; at: number }>();
  private seq = 0;

  constructor(
    private readonly env: SoakEnvironment,
    private readonly opts: LoadOptions,
  ) {}

  async start(): Promise<void> {
    this.inputs = await kindInputs();
    this.running = true;
    this.loops = [this.submitLoop(), this.chatLoop()];
  }

  /** Stops submitting and waits for every follower to end. */
  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
    await Promise.all([...this.inFlight]);
  }

  private error(what: string): void {
    this.counts.errors++;
    if (this.errorSamples.length < 10) this.errorSamples.push(what);
  }

  private async submitLoop(): Promise<void> {
    const gap = 1000 / this.opts.jobsPerSecond;
    let next = Date.now();
    while (this.running) {
      next += gap;
      if (this.inFlight.size < this.opts.maxInFlight) {
        const job = this.oneJob(this.seq++).catch((err: Error) => this.error(`job: ${err.message}`));
        this.inFlight.add(job);
        void job.finally(() => this.inFlight.delete(job));
      }
      await sleep(Math.max(0, next - Date.now()));
    }
  }

  private async request(method: string, p: string, body?: unknown): Promise<{ status: number; body: any }> {
    const res = await fetch(this.env.gateway.url + p, {
      method,
      headers: { authorization: `Bearer ${this.env.accountKey}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null };
  }

  /** The kind's example input, its file fields filled from a fresh output of an accepted type when there is one. */
  private input(kind: string): Record<string, unknown> {
    const spec = KINDS.find((k) => k.kind === kind)!;
    const input = { ...this.inputs[kind] };
    for (const [field, { accept }] of Object.entries(fileFields(spec))) {
      const fresh = accept.map((type) => this.outputs.get(type)).find((o) => o && Date.now() - o.at < this.opts.reuseOutputsForMs);
      if (fresh) {
        input[field] = fresh.url;
        this.counts.inputsFromOutputs++;
      }
    }
    return input;
  }

  private async oneJob(n: number): Promise<void> {
    const kind = KINDS[n % KINDS.length]!.kind;
    // 11 kinds and 3 ways share no factor, so every kind is followed every way in turn.
    const way = n % 3;
    const hook = `/hook/${n}`;
    const body: Record<string, unknown> = { kind, input: this.input(kind) };
    if (way === 1) Object.assign(body, { webhook: this.env.receiver.url(hook), webhook_events_filter: ['start', 'output', 'logs', 'completed'] });
    const created = await this.request('POST', '/v1/jobs', body);
    if (created.status !== 201 && created.status !== 202) return this.error(`submit ${kind}: ${created.status} ${JSON.stringify(created.body)}`);
    this.counts.submitted++;
    this.counts.byKind[kind] = (this.counts.byKind[kind] ?? 0) + 1;
    const runId = created.body.run_id as string;
    let job: any;
    if (way === 0) {
      this.counts.followedBySse++;
      job = await this.followSse(runId);
    } else if (way === 1) {
      this.counts.followedByWebhook++;
      job = await this.awaitWebhook(hook);
    } else {
      this.counts.followedByPolling++;
      job = await this.poll(runId);
    }
    if (job?.status !== 'succeeded') return this.error(`${kind} ${runId} ended ${job?.status}: ${JSON.stringify(job?.error ?? null)}`);
    this.counts.succeeded++;
    for (const file of job.output?.files ?? []) if (file.content_type) this.outputs.set(file.content_type, { url: file.url, at: Date.now() });
  }

  private async followSse(runId: string): Promise<any> {
    const sse = await new SseClient(`${this.env.gateway.url}/v1/jobs/${runId}/events`, this.env.accountKey).open();
    try {
      await sse.until((c) => c.frames.some((f) => f.event === 'done'), JOB_DEADLINE_MS);
      return [...sse.frames].reverse().find((f) => f.event === 'status' && TERMINAL.has(f.data.status))?.data;
    } finally {
      sse.close();
    }
  }

  /** The job of the `job.completed` delivery to `hook`; the receiver's record of it is dropped after. */
  private async awaitWebhook(hook: string): Promise<any> {
    const deadline = Date.now() + JOB_DEADLINE_MS;
    try {
      for (;;) {
        const done = this.env.receiver.at(hook).map((r) => JSON.parse(r.body)).find((d) => d.type === 'job.completed');
        if (done) return done.data;
        if (Date.now() > deadline) throw new Error(`no job.completed delivery to ${hook}`);
        await sleep(100);
      }
    } finally {
      // Deliveries gathered in a window after the end may still come; give them a moment, then forget the hook.
      setTimeout(() => (this.env.receiver.received = this.env.receiver.received.filter((r) => r.path !== hook)), 2_000).unref();
    }
  }

  private async poll(runId: string): Promise<any> {
    const deadline = Date.now() + JOB_DEADLINE_MS;
    for (;;) {
      const res = await this.request('GET', `/v1/jobs/${runId}`);
      if (res.status !== 200) throw new Error(`GET ${runId}: ${res.status}`);
      if (TERMINAL.has(res.body.status)) return res.body;
      if (Date.now() > deadline) throw new Error(`${runId} still ${res.body.status}`);
      await sleep(250);
    }
  }

  private async chatLoop(): Promise<void> {
    while (this.running) {
      try {
        const res = await fetch(`${this.env.gateway.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${this.env.accountKey}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'default', stream: true, messages: [{ role: 'user', content: `tell me about trains (${this.seq})` }] }),
        });
        const text = await res.text();
        if (res.status !== 200 || !text.includes('data: [DONE]')) this.error(`chat stream: ${res.status} ${text.slice(0, 200)}`);
        else this.counts.chatStreams++;
      } catch (err) {
        this.error(`chat stream: ${(err as Error).message}`);
      }
      const until = Date.now() + this.opts.chatEverySeconds * 1000;
      while (this.running && Date.now() < until) await sleep(100);
    }
  }
}
