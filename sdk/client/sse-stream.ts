import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { Deadline, sleep } from './deadline.js';
import { SwitchyardApiError, SwitchyardStreamError } from './errors.js';
import type { HttpTransport } from './http-transport.js';
import { toJobResult } from './job-result.js';
import type { JobEvent, JobEventName, StreamOptions } from './types.js';
import type { BatchEvent } from './batch-types.js';

const EVENT_NAMES: ReadonlySet<string> = new Set<JobEventName>(['status', 'progress', 'log', 'output', 'done']);
const DEFAULT_RECONNECTS = 5;
const DEFAULT_DELAY_MS = 1000;

/**
 * The events of one run (GET /v1/jobs/{run_id}/events) as an async iterable. A dropped
 * connection, a 5xx or 429, or a connect timeout is followed by a reconnect that sends
 * `Last-Event-ID`, so the events arrive without gaps; ids already seen are skipped. Ends after
 * `done`. Breaking out of a `for await` closes the connection.
 */
export class JobEventStream implements AsyncIterable<JobEvent> {
  private last: number | undefined;
  private serverRetryMs: number | undefined;

  constructor(
    private readonly transport: HttpTransport,
    readonly runId: string,
    private readonly opts: StreamOptions = {},
    /** The stream's path: a run's, or a batch's (BatchEventStream, whose `done` carries the batch, not a job). */
    private readonly path = `/v1/jobs/${encodeURIComponent(runId)}/events`,
  ) {
    this.last = opts.lastEventId;
  }

  /** The id of the last event yielded: resume from it with `stream(runId, {lastEventId})`. */
  get lastEventId(): number | undefined {
    return this.last;
  }

  [Symbol.asyncIterator](): AsyncIterator<JobEvent> {
    return this.events();
  }

  private async *events(): AsyncGenerator<JobEvent, void, undefined> {
    const maxReconnects = this.opts.maxReconnects ?? DEFAULT_RECONNECTS;
    let failures = 0;
    for (;;) {
      let lastError: unknown;
      let progressed = false;
      try {
        for await (const ev of this.connection()) {
          progressed = true;
          yield ev;
          if (ev.event === 'done') return;
        }
        lastError = new Error('the server closed the stream before done');
      } catch (err) {
        if (this.opts.signal?.aborted) throw this.opts.signal.reason ?? err;
        if (err instanceof SwitchyardApiError && !err.retryable) throw err;
        lastError = err;
      }
      failures = progressed ? 1 : failures + 1;
      if (failures > maxReconnects) {
        const detail = lastError instanceof Error ? lastError.message : String(lastError);
        throw new SwitchyardStreamError(`the event stream of ${this.runId} failed ${failures} times in a row (${detail}); resume with lastEventId ${this.last ?? 'unset'}`, {
          runId: this.runId,
          lastEventId: this.last,
          cause: lastError,
        });
      }
      const hinted = lastError instanceof SwitchyardApiError && lastError.retryAfter !== undefined ? lastError.retryAfter * 1000 : 0;
      await sleep(Math.max(this.opts.reconnectDelayMs ?? this.serverRetryMs ?? DEFAULT_DELAY_MS, hinted), this.opts.signal);
    }
  }

  /** One connection: yields its new events in order; returns when the server closes it. */
  private async *connection(): AsyncGenerator<JobEvent, void, undefined> {
    const path = this.path;
    const headers: Record<string, string> = { accept: 'text/event-stream', 'cache-control': 'no-cache' };
    if (this.last !== undefined) headers['last-event-id'] = String(this.last);
    // The client's timeout bounds the wait for the response headers only, not the stream.
    const deadline = new Deadline(this.transport.timeoutMs, this.opts.signal);
    let reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
    try {
      const req = { method: 'GET', path, headers };
      let res: Response;
      try {
        res = await this.transport.send(req, deadline);
      } catch (err) {
        throw this.transport.failure(err, req, deadline);
      }
      deadline.stopTimer();
      const type = res.headers.get('content-type') ?? '';
      if (!type.startsWith('text/event-stream') || !res.body) {
        throw new SwitchyardApiError({ status: res.status, code: 'invalid_response', message: `${path} answered ${type || 'no content type'}, not text/event-stream`, body: await res.text().catch(() => '') });
      }
      reader = res.body.getReader();
      const decoder = new TextDecoder();
      const pending: EventSourceMessage[] = [];
      const parser = createParser({ onEvent: (m) => pending.push(m), onRetry: (ms) => (this.serverRetryMs = ms) });
      for (;;) {
        let chunk: Awaited<ReturnType<typeof reader.read>>;
        try {
          chunk = await reader.read();
        } catch (err) {
          throw this.transport.failure(err, req, deadline);
        }
        if (chunk.done) return;
        parser.feed(decoder.decode(chunk.value, { stream: true }));
        while (pending.length) {
          const ev = this.accept(pending.shift()!);
          if (ev) yield ev;
        }
      }
    } finally {
      deadline.abort(); // a stream left early (done, break, error) closes its connection
      deadline.dispose();
      reader?.cancel().catch(() => {});
    }
  }

  /** The typed event of a frame, or null for one already seen or of an unknown name. */
  private accept(m: EventSourceMessage): JobEvent | null {
    const id = m.id !== undefined && /^\d+$/.test(m.id) ? Number(m.id) : undefined;
    if (id !== undefined) {
      if (this.last !== undefined && id <= this.last) return null;
      this.last = id;
    }
    if (!m.event || !EVENT_NAMES.has(m.event)) return null;
    let data: unknown;
    try {
      data = JSON.parse(m.data);
    } catch {
      data = m.data;
    }
    if (m.event === 'status' || (m.event === 'done' && (data as { run_id?: unknown } | null)?.run_id !== undefined)) data = toJobResult(data);
    return { id: id ?? NaN, event: m.event, data } as JobEvent;
  }
}

/**
 * Every job of a batch over one stream (GET /v1/batches/{batch_id}/events): a `status` per job
 * at first, one per status change after, and `done` with the batch (Batch) once every job has
 * ended. Reconnects and resumes as JobEventStream does.
 */
export class BatchEventStream implements AsyncIterable<BatchEvent> {
  private readonly inner: JobEventStream;

  constructor(transport: HttpTransport, readonly batchId: string, opts: StreamOptions = {}) {
    this.inner = new JobEventStream(transport, batchId, opts, `/v1/batches/${encodeURIComponent(batchId)}/events`);
  }

  get lastEventId(): number | undefined {
    return this.inner.lastEventId;
  }

  [Symbol.asyncIterator](): AsyncIterator<BatchEvent> {
    return this.inner[Symbol.asyncIterator]() as unknown as AsyncIterator<BatchEvent>;
  }
}
