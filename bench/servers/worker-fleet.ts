import { createDemoEngine } from '../../sdk/engines/demo/index.js';
import { createOpenAiEngine } from '../../sdk/engines/openai/index.js';
import type { Engine } from '../../sdk/engines/types.js';
import { SwitchyardWorker, silentLogger } from '../../sdk/worker/index.js';
import { modelId } from '../lib/worker-fleet.js';

/**
 * SDK workers in their own process so they never share the load generator's event loop.
 * Env: GATEWAY_URL, WORKER_TOKEN, WORKERS, SLOTS, KIND, BACKEND_URL (HANDLER=openai), and
 *   MODELS   number of distinct models (default 0: none, the kind's default model only); worker i
 *            advertises the one model `modelId(i % MODELS)` (m-000, m-001, ...) for KIND
 *   HANDLER  `demo` (default): the demo engine with no delay (renders and uploads its artifact);
 *            `noop`: completes at once with the kind's required output fields and no artifact,
 *            for inference:llm:text-generate, so the run costs the gateway no upload;
 *            `words`: inference:llm:text-generate streamed as the demo llm streams with no delay
 *            (one ctx.output per word, all in one burst), but exactly the job's `max_tokens`
 *            words (the demo's own text is 20 to 60 words), and no artifact;
 *            `openai`: the openai engine relaying BACKEND_URL (an OpenAI base URL with /v1),
 *            advertising the models it lists
 *
 * stdout: `{"ready":true}` once every worker is registered, then one line per event, batched
 * and flushed every few ms (the timestamp is taken when the event fires, so the flush delay
 * does not enter any latency):
 *   `l <run_id> <ms>`  the `lease` event (performance.timeOrigin + performance.now(), the same
 *                      wall clock the parent uses)
 *   `c <run_id> <ms>`  `completed`: the gateway acknowledged `complete`, the run is `succeeded`
 *   `f <run_id> <why>` `failed` or `dropped`, or a lease of a model the worker does not serve
 * SIGTERM stops the workers (running leases finish) and exits.
 */
const env = (k: string, d?: string) => {
  const v = process.env[k] ?? d;
  if (v === undefined) throw new Error(`worker-fleet: ${k} is required`);
  return v;
};
const gateway = env('GATEWAY_URL');
const token = env('WORKER_TOKEN');
const count = Number(env('WORKERS', '4'));
const slots = Number(env('SLOTS', '8'));
const kind = env('KIND', 'inference:image:generate');
const modelCount = Number(env('MODELS', '0'));
const handlerName = env('HANDLER', 'demo');

const now = () => performance.timeOrigin + performance.now();
let buffer = '';
let flushTimer: NodeJS.Timeout | undefined;
function emit(line: string) {
  buffer += `${line}\n`;
  flushTimer ??= setTimeout(() => {
    flushTimer = undefined;
    const out = buffer;
    buffer = '';
    process.stdout.write(out);
  }, 5);
}

const noop: Engine = async (_kind, input) => ({
  artifacts: [],
  extra: { text: '', finish_reason: 'stop', usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 }, model: input.model ?? 'default' },
});
const words: Engine = async (_kind, input, ctx) => {
  const n = Math.max(1, Number(input.max_tokens) || 16);
  let text = '';
  for (let i = 0; i < n; i++) {
    const delta = i === 0 ? 'w0' : ` w${i}`;
    text += delta;
    ctx.output(delta);
  }
  return { artifacts: [], extra: { text, finish_reason: 'length', usage: { prompt_tokens: 1, completion_tokens: n, total_tokens: n + 1 }, model: input.model ?? 'default' } };
};
const handlers: Record<string, () => Promise<{ engine: Engine; models?: Array<{ id: string }> }>> = {
  demo: async () => ({ engine: createDemoEngine({ delayMs: 0, espeakNg: null }) }),
  noop: async () => ({ engine: noop }),
  words: async () => ({ engine: words }),
  openai: async () => {
    const e = createOpenAiEngine({ backendUrl: env('BACKEND_URL') });
    return { engine: e.handler, models: await e.listModels() };
  },
};
if (!handlers[handlerName]) throw new Error(`worker-fleet: HANDLER must be one of ${Object.keys(handlers).join(', ')}, not ${handlerName}`);
const { engine, models: engineModels } = await handlers[handlerName]();
const workers = Array.from({ length: count }, (_, i) => {
  const model = modelCount > 0 ? modelId(i % modelCount) : undefined;
  const models = model ? [{ id: model }] : engineModels;
  const w = new SwitchyardWorker({
    gateway, token, kinds: [kind], tier: 'open', slots, handler: engine, logger: silentLogger,
    ...(models ? { models: { [kind]: models } } : {}),
  });
  w.on('lease', (l) => emit(model && l.input.model !== model ? `f ${l.run_id} wrong_model:${String(l.input.model)}` : `l ${l.run_id} ${now().toFixed(3)}`));
  w.on('completed', (l) => emit(`c ${l.run_id} ${now().toFixed(3)}`));
  w.on('failed', (l, e) => emit(`f ${l.run_id} failed:${e.code}`));
  w.on('dropped', (l, why) => emit(`f ${l.run_id} dropped:${why.replace(/\s+/g, '_')}`));
  return w;
});
await Promise.all(workers.map((w) => w.start()));
process.stdout.write(`${JSON.stringify({ ready: true })}\n`);

process.once('SIGTERM', () => {
  void Promise.all(workers.map((w) => w.stop({ timeoutMs: 5000 })))
    .catch((err) => console.error('worker-fleet: unclean stop', err))
    .finally(() => {
      process.stdout.write(buffer, () => process.exit(0));
    });
});
