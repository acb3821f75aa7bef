import { withUsage } from '../usage.js';
import { readFile } from 'node:fs/promises';
import { MODEL_ID_PATTERN, type WorkerModel } from '../../protocol/index.js';
import type { Engine, EngineResult } from '../types.js';
import { UpstreamError } from '../upstream-error.js';
import { CogClient } from './client.js';
import { type KindFields, cogInputSchema, modelIdOf } from './input-schema.js';
import { fileUrlPaths, outputResult } from './output-files.js';
import { engineError, runPrediction } from './prediction-runner.js';
import { waitUntilReady } from './readiness.js';
import { WebhookListener } from './webhook-listener.js';

export type { KindFields } from './input-schema.js';
export { CogClient } from './client.js';

export interface CogEngineOptions {
  /** The Cog container's HTTP server: `http://127.0.0.1:5000`. */
  cogUrl: string;
  /** The one kind served, and what the engine needs of its input schema. */
  kind: string;
  kindFields: KindFields;
  /** The model id to advertise; unset: one made from the OpenAPI document's info.title. */
  modelId?: string;
  /** Where the webhook listener binds. @defaultValue 127.0.0.1, any free port */
  webhookListen?: { host: string; port: number };
  /** The listener's base URL as the container reaches it, when not the bound address. */
  webhookUrl?: string;
  /** How long to wait for the server to be READY at start. @defaultValue 300000 */
  readyTimeoutMs?: number;
  /** @defaultValue 2000 */
  healthIntervalMs?: number;
  /** @defaultValue 30000 */
  firstWebhookMs?: number;
  /** The biggest webhook report taken (output files come inlined as data URIs). @defaultValue 512 MiB */
  maxWebhookBytes?: number;
  /** Limit of each HTTP call to the server. @defaultValue 30000 */
  requestTimeoutMs?: number;
}

export interface CogEngine {
  handler: Engine;
  /** The advertised model, with the input schema made from Cog's. */
  model: WorkerModel;
  /** Cog inputs the model has but jobs cannot set, with why. */
  dropped: Array<{ field: string; why: string }>;
  close(): Promise<void>;
  /** Resolves while the server is READY (or BUSY); the worker asks it after a lease found the server gone (`backend.probe`). */
  probe(): Promise<void>;
}

const MODEL_ID = new RegExp(MODEL_ID_PATTERN);

/**
 * An engine in front of one Cog container (docs/engines.md, "cog"): it waits for the server to
 * be READY, reads its OpenAPI document for the model's inputs, then runs each job as one
 * prediction. `start` rejects with the reason the container cannot serve.
 */
export async function createCogEngine(opts: CogEngineOptions): Promise<CogEngine> {
  const client = new CogClient(opts.cogUrl, opts.requestTimeoutMs ?? 30_000);
  if (opts.modelId !== undefined && !MODEL_ID.test(opts.modelId)) throw new TypeError(`${JSON.stringify(opts.modelId)} is not a model id (1-200 of letters, digits and ._:/@+-, starting with a letter or digit)`);
  await waitUntilReady(client, opts.readyTimeoutMs ?? 300_000);
  const openapi = await client.openapi();
  const input = cogInputSchema(openapi, opts.kindFields);
  const filePaths = fileUrlPaths(openapi);
  const isFile = (value: string, path: string) => value.startsWith('data:') || (/^https?:\/\//i.test(value) && filePaths.has(path.replace(/\/\d+(?=\/|$)/g, '/*')));
  const listener = new WebhookListener(opts.webhookListen ?? { host: '127.0.0.1', port: 0 }, opts.webhookUrl, opts.maxWebhookBytes);
  await listener.start();
  const model: WorkerModel = { id: opts.modelId ?? modelIdOf(openapi), input_schema: input.schema };

  const handler: Engine = async (kind, jobInput, ctx): Promise<EngineResult> => {
    if (kind !== opts.kind) throw engineError('unsupported_kind', `this cog worker serves ${opts.kind}, not ${kind}`, true);
    // The job's fields that the Cog model declares, as they are; its file fields as data URIs
    // (Cog downloads Path inputs from http(s) and data: URLs alike).
    const cogInput: Record<string, unknown> = {};
    for (const field of input.fields) {
      if (jobInput[field] === undefined) continue;
      if (input.fileFields.includes(field)) {
        const file = await ctx.inputFile(field);
        cogInput[field] = `data:${file.contentType};base64,${(await readFile(file.path)).toString('base64')}`;
      } else cogInput[field] = jobInput[field];
    }
    const output = await runPrediction(cogInput, ctx, { client, listener, healthIntervalMs: opts.healthIntervalMs ?? 2000, firstWebhookMs: opts.firstWebhookMs ?? 30_000, isFile });
    try {
      return withUsage(kind, await outputResult(output, { isFileUrl: (v, p) => isFile(v, p), download: (url) => client.download(url, ctx.signal) }));
    } catch (err) {
      if (ctx.signal.aborted || err instanceof UpstreamError) throw err;
      throw new UpstreamError('upstream_bad_response', `the Cog output could not be read: ${(err as Error).message}`, true);
    }
  };

  const probe = async () => {
    const health = await client.health();
    if (health.status !== 'READY' && health.status !== 'BUSY') throw new Error(`the Cog server at ${client.base} is ${health.status}`);
  };
  return { handler, model, dropped: input.dropped, close: () => listener.close(), probe };
}
