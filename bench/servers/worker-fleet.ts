import { createDemoEngine } from '../../sdk/engines/demo/index.js';
import type { Engine } from '../../sdk/engines/types.js';
import { SwitchyardWorker, silentLogger } from '../../sdk/worker/index.js';
import { modelId } from '../lib/worker-fleet.js';

/**
 * SDK workers in their own process so they never share the load generator's event loop.
 * Env: GATEWAY_URL, WORKER_TOKEN, WORKERS, SLOTS, KIND, and
 *   MODELS   number of distinct models (default 0: none, the kind's default model only); worker i
 *            advertises the one model `modelId(i % MODELS)` (m-000, m-001, ...) for KIND
 *   HANDLER  `demo` (default): the demo engine with no delay (renders and uploads its artifact);
 *            `noop`: completes at once with the kind's required output fields and no artifact,
 *            for inference:llm:text-generate, so the run costs the gateway no upload
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
if (handlerName !== 'demo' && handlerName !== 'noop') throw new Error(`worker-fleet: HANDLER must be demo or noop, not ${handlerName}`);
const engine = handlerName === 'noop' ? noop : createDemoEngine({ delayMs: 0, espeakNg: null });
const workers = Array.from({ length: count }, (_, i) => {
  const model = modelCount > 0 ? modelId(i % modelCount) : undefined;
  const w = new SwitchyardWorker({
    gateway, token, kinds: [kind], tier: 'open', slots, handler: engine, logger: silentLogger,
    ...(model ? { models: { [kind]: [{ id: model }] } } : {}),
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
