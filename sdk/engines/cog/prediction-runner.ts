import { randomUUID } from 'node:crypto';
import type { EngineContext } from '../types.js';
import { UpstreamError } from '../upstream-error.js';
import type { CogClient } from './client.js';
import { type WebhookListener, WebhookTooLarge } from './webhook-listener.js';

/**
 * One job as one Cog prediction: created async at an id of ours (`PUT /predictions/{id}`,
 * `Prefer: respond-async`), followed through its webhook, cancelled with
 * `POST /predictions/{id}/cancel` when the lease is. While it runs, the server's health is
 * polled, since a container that dies sends no webhook: a failed poll fails the lease, retryable.
 */

export interface RunnerOptions {
  client: CogClient;
  listener: WebhookListener;
  /** How often the server's health is checked while a prediction runs. */
  healthIntervalMs: number;
  /** The longest to wait for Cog's first webhook (sent at once, on start): past it the webhook cannot reach us. */
  firstWebhookMs: number;
  /** Whether an output string at this JSON pointer is a file (sent as a data URI or URL, not text). */
  isFile: (value: string, path: string) => boolean;
}

const TERMINAL = new Set(['succeeded', 'failed', 'canceled']);

/** An error the worker SDK reports as the lease's failure (`code`, `retryable`). */
export const engineError = (code: string, message: string, retryable: boolean) => Object.assign(new Error(message), { code, retryable });

/**
 * Runs the prediction; resolves with its final output. Logs go to `ctx.log` line by line as
 * the growing `logs` string brings them; text output (an iterator's growing list of strings,
 * or a string) goes to `ctx.output` as it arrives.
 */
export async function runPrediction(input: Record<string, unknown>, ctx: EngineContext, opts: RunnerOptions): Promise<unknown> {
  ctx.signal.throwIfAborted();
  // Cog's recommended id: a random UUID, base32 without padding (Cog's docs/http.md); hex is as unique and as safe in a path.
  const id = randomUUID().replaceAll('-', '');
  const { client, listener } = opts;
  let logsSeen = 0;
  let partialLine = '';
  let outputsSeen = 0;
  let heard = false;
  let settle!: { resolve: (output: unknown) => void; reject: (err: unknown) => void };
  const done = new Promise<unknown>((resolve, reject) => (settle = { resolve, reject }));
  let finished = false;
  const finish = (err: unknown, output?: unknown) => {
    if (finished) return;
    finished = true;
    if (err) settle.reject(err);
    else settle.resolve(output);
  };

  const takeLogs = (logs: unknown, final: boolean) => {
    if (typeof logs === 'string' && logs.length > logsSeen) {
      partialLine += logs.slice(logsSeen);
      logsSeen = logs.length;
    }
    const lines = partialLine.split(/\r?\n/);
    partialLine = final ? '' : lines.pop()!;
    for (const line of final ? lines.filter((l, i) => l !== '' || i < lines.length - 1) : lines) ctx.log(line);
  };
  const takeOutput = (output: unknown, final: boolean) => {
    if (Array.isArray(output)) {
      for (; outputsSeen < output.length; outputsSeen++) {
        const item = output[outputsSeen];
        if (typeof item === 'string' && !opts.isFile(item, `/${outputsSeen}`)) ctx.output(item);
      }
    } else if (final && typeof output === 'string' && !opts.isFile(output, '')) ctx.output(output);
  };

  const webhook = listener.on(id, (prediction) => {
    if (finished) return;
    heard = true;
    // Cog would not send it smaller next time, and its final report may be as big: waiting on would never end.
    if (prediction instanceof WebhookTooLarge) return finish(engineError('output_too_large', `${prediction.message}: the output files are too big to take as data URIs; start Cog with --upload-url`, false));
    const status = String(prediction.status ?? '');
    const final = TERMINAL.has(status);
    takeLogs(prediction.logs, final);
    takeOutput(prediction.output, final);
    if (status === 'succeeded') finish(null, prediction.output);
    else if (status === 'failed') {
      const error = typeof prediction.error === 'string' && prediction.error ? prediction.error : 'no error message';
      finish(engineError('prediction_failed', `the Cog prediction failed: ${error}`, false));
    } else if (status === 'canceled' && !ctx.signal.aborted) {
      finish(new UpstreamError('upstream_unavailable', 'the Cog server canceled the prediction (it is shutting down?)', true));
    }
  });

  const created = Date.now();
  let polling = false;
  const poll = setInterval(async () => {
    if (polling || finished) return;
    polling = true;
    try {
      const health = await client.health();
      if (health.status === 'SETUP_FAILED' || health.status === 'DEFUNCT') {
        finish(new UpstreamError('upstream_unavailable', `the Cog server at ${client.base} became ${health.status} during the prediction`, true));
      } else if (!heard && Date.now() - created > opts.firstWebhookMs) {
        finish(new UpstreamError('upstream_unavailable', `no webhook from the Cog server within ${opts.firstWebhookMs} ms: it cannot reach ${webhook.replace(/\/[^/]+\/[^/]+$/, '')} (set --cog-webhook-url to an address the container reaches)`, true));
      }
    } catch (err) {
      finish(new UpstreamError('upstream_unavailable', `the Cog server went away during the prediction: ${(err as Error).message}`, true));
    } finally {
      polling = false;
    }
  }, opts.healthIntervalMs);

  const onAbort = () => finish(ctx.signal.reason);
  ctx.signal.addEventListener('abort', onAbort, { once: true });
  try {
    await client.createAsync({ id, input, webhook, webhook_events_filter: ['start', 'output', 'logs', 'completed'] }, ctx.signal).catch((err) => {
      if (err instanceof UpstreamError && err.status === 422) throw engineError('bad_input', err.message.replace('with 422: ', 'with 422 (Cog refused the input): '), false);
      // All of Cog's prediction slots are taken (another client, or --slots above the model's concurrency): a moment's wait, or another worker, will do.
      if (err instanceof UpstreamError && err.status === 409) throw new UpstreamError('upstream_unavailable', err.message, true, 409);
      throw err;
    });
    return await done;
  } catch (err) {
    // The prediction may still run on the server: stop it, whatever ended our wait.
    if (!isFinishedOnServer(err)) await client.cancel(id).catch(() => false);
    throw err;
  } finally {
    finished = true;
    clearInterval(poll);
    ctx.signal.removeEventListener('abort', onAbort);
    listener.off(id);
  }
}

/** A prediction that failed on the server has nothing left to cancel. */
const isFinishedOnServer = (err: unknown) => (err as { code?: string })?.code === 'prediction_failed' || (err as { code?: string })?.code === 'bad_input';
