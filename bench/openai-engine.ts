import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { createOpenAiEngine, LLM_KIND } from '../sdk/engines/openai/index.js';
import type { EngineContext } from '../sdk/engines/types.js';
import { startChildServer } from './lib/child-server.js';
import { number } from './lib/options.js';
import { fmt, table } from './lib/report.js';

/**
 * The openai engine alone (sdk/engines/openai/), without a gateway or the worker SDK: this
 * process calls its handler in `streams` closed loops against the stream benchmark's mock
 * upstream (bench/servers/openai-upstream.ts, a child), each completion asking for `tokens`
 * content chunks, and counts the deltas the engine hands to `ctx.output`. It reports this
 * process's CPU per token and per completion (the upstream's is not in it) for two token
 * counts, and from the two the engine's cost per completion (the HTTP call) and per token (SSE
 * parsing, JSON, the completion builder), as a line through both. Profile it with
 * `node --cpu-prof --import tsx bench/run.ts openai-engine`.
 */
const UPSTREAM_MODEL = 'bench-model';

interface Options {
  streams: number;
  tokens: number[];
  duration: number;
  warmup: number;
  json: boolean;
}

function parseOptions(args: string[]): Options {
  const { values } = parseArgs({
    args,
    options: {
      streams: { type: 'string', default: '64' },
      tokens: { type: 'string', default: '64,512' },
      duration: { type: 'string', default: '5' },
      warmup: { type: 'string', default: '1' },
      json: { type: 'boolean', default: false },
    },
  });
  const tokens = values.tokens.split(',').map((t) => Math.round(number('tokens', t, 1)));
  return { streams: Math.round(number('streams', values.streams, 1)), tokens, duration: number('duration', values.duration, 1), warmup: number('warmup', values.warmup, 0), json: values.json };
}

interface Phase {
  tokens: number;
  tokensPerSec: number;
  completionsPerSec: number;
  usPerToken: number;
  usPerCompletion: number;
  errors: number;
  firstError?: string;
}

async function phase(handler: ReturnType<typeof createOpenAiEngine>['handler'], streams: number, tokens: number, o: Options): Promise<Phase> {
  let deltas = 0;
  let completions = 0;
  let errors = 0;
  let firstError: string | undefined;
  let running = true;
  const input = { model: UPSTREAM_MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: tokens };
  const loop = async () => {
    while (running) {
      // Each completion its own signal, as each lease has in a worker.
      const ctx: EngineContext = {
        signal: new AbortController().signal,
        progress: () => {},
        log: () => {},
        output: () => void deltas++,
        inputFile: () => Promise.reject(new Error('no input files here')),
      };
      try {
        const result = await handler(LLM_KIND, input, ctx);
        const usage = result.extra?.usage as { completion_tokens?: number } | undefined;
        if (usage?.completion_tokens !== tokens) throw new Error(`usage says ${usage?.completion_tokens} tokens, not ${tokens}`);
        completions++;
      } catch (err) {
        errors++;
        firstError ??= String((err as Error)?.message ?? err);
      }
    }
  };
  const loops = Array.from({ length: streams }, loop);
  await sleep(o.warmup * 1000);
  const [d0, c0, cpu0, t0] = [deltas, completions, process.cpuUsage(), performance.now()];
  await sleep(o.duration * 1000);
  const cpu = process.cpuUsage(cpu0);
  const seconds = (performance.now() - t0) / 1000;
  const [d, c] = [deltas - d0, completions - c0];
  running = false;
  await Promise.all(loops);
  const us = cpu.user + cpu.system;
  return { tokens, tokensPerSec: d / seconds, completionsPerSec: c / seconds, usPerToken: us / d, usPerCompletion: us / c, errors, firstError };
}

export default async function openaiEngine(args: string[]): Promise<number> {
  const o = parseOptions(args);
  const log = (msg: string) => o.json || console.error(msg);
  const upstream = await startChildServer('openai-upstream.ts', { MODEL: UPSTREAM_MODEL });
  try {
    const engine = createOpenAiEngine({ backendUrl: upstream.url, models: [UPSTREAM_MODEL] });
    const phases: Phase[] = [];
    for (const tokens of o.tokens) {
      log(`${o.streams} streams x ${tokens} tokens, ${o.warmup} s warm-up, ${o.duration} s measured`);
      phases.push(await phase(engine.handler, o.streams, tokens, o));
    }
    // CPU per completion = perCompletion + tokens x perToken, through the first and last count.
    const [a, b] = [phases[0], phases[phases.length - 1]];
    const perToken = b.tokens === a.tokens ? NaN : (b.usPerCompletion - a.usPerCompletion) / (b.tokens - a.tokens);
    const perCompletion = a.usPerCompletion - perToken * a.tokens;
    if (o.json) {
      console.log(JSON.stringify({ benchmark: 'openai-engine', options: o, phases, fit: { usPerCompletion: perCompletion, usPerToken: perToken } }, null, 2));
    } else {
      console.log(table(['tokens', 'tokens/s', 'completions/s', 'engine µs/token', 'engine µs/completion', 'errors'], phases.map((p) => [String(p.tokens), fmt(p.tokensPerSec), fmt(p.completionsPerSec), fmt(p.usPerToken, 2), fmt(p.usPerCompletion, 1), fmt(p.errors)])));
      console.log('(engine: this process, the handler and its HTTP client; the upstream child is not counted)');
      if (Number.isFinite(perToken)) console.log(`fit: ${fmt(perCompletion, 1)} µs per completion + ${fmt(perToken, 2)} µs per token`);
      for (const p of phases) if (p.firstError) console.log(`${p.tokens} tokens: ${p.errors} errors (first: ${p.firstError})`);
    }
    return phases.some((p) => p.errors) ? 1 : 0;
  } finally {
    await upstream.stop();
  }
}
