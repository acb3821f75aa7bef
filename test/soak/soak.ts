import { KINDS } from '../../models/kinds.js';
import { judgeGrowth, type GrowthVerdict } from './growth-detector.js';
import { SoakEnvironment, type SoakSettings } from './soak-environment.js';
import { SoakLoad, type LoadCounts, type LoadOptions } from './soak-load.js';
import { SERIES, SoakSampler, seriesFor, type SeriesSpec } from './soak-sampler.js';

export interface SoakOptions {
  /** The sampled, judged period. */
  minutes: number;
  /** Load before sampling starts, so the gateway is warm and Redis holds a retention window of runs. */
  warmupSeconds: number;
  sampleEverySeconds: number;
  settings: SoakSettings;
  load: LoadOptions;
  /** Progress lines (one per minute); the report is the caller's. */
  log: (line: string) => void;
}

export interface SoakResult {
  verdicts: Array<{ spec: SeriesSpec; verdict: GrowthVerdict }>;
  counts: LoadCounts;
  errorSamples: string[];
  /** Why the run failed, one line each; empty when it passed. */
  failures: string[];
  minutes: number;
  samples: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Defaults sized for a 2-core machine: a moderate load the demo fleet keeps up with. */
export function defaultOptions(minutes: number): Omit<SoakOptions, 'log'> {
  const retentionSeconds = 30;
  return {
    minutes,
    warmupSeconds: Math.min(45, Math.max(15, minutes * 15)),
    sampleEverySeconds: Math.min(5, Math.max(1, (minutes * 60) / 40)),
    settings: { retentionSeconds, workers: 3, slots: 4, engineDelayMs: 200 },
    load: { jobsPerSecond: 4, maxInFlight: 32, chatEverySeconds: 2, reuseOutputsForMs: (retentionSeconds * 1000) / 2 },
  };
}

/**
 * A soak: starts the environment, keeps the load going through the warm-up and the sampled
 * minutes, then stops the load, lets every follower end and judges each series. It fails on
 * growth, and also on any error of the load (a job that did not succeed, an error answer, a
 * broken stream) and on a load that missed a kind or a way of following: a soak that did not
 * do what it says proves nothing.
 */
export async function runSoak(opts: SoakOptions): Promise<SoakResult> {
  const env = await new SoakEnvironment(opts.settings).start();
  const load = new SoakLoad(env, opts.load);
  const sampler = new SoakSampler({ pid: env.pid, gatewayUrl: env.gateway.url, redisUrl: env.redis.url, prefix: env.prefix });
  try {
    await load.start();
    opts.log(`soak: gateway pid ${env.pid} on ${env.redis.url}; warm-up ${opts.warmupSeconds} s, then ${opts.minutes} min sampled every ${opts.sampleEverySeconds} s`);
    await sleep(opts.warmupSeconds * 1000);
    const end = Date.now() + opts.minutes * 60_000;
    let nextLog = Date.now() + 60_000;
    for (let next = Date.now(); next <= end; next += opts.sampleEverySeconds * 1000) {
      await sleep(Math.max(0, next - Date.now()));
      await sampler.sample();
      if (Date.now() >= nextLog) {
        nextLog += 60_000;
        opts.log(`soak: ${Math.round((end - Date.now()) / 1000)} s left; ${load.counts.succeeded} jobs succeeded, ${load.counts.errors} errors`);
      }
    }
    await load.stop();
    return judge(opts, sampler, load);
  } finally {
    sampler.close();
    await env.stop();
  }
}

function judge(opts: SoakOptions, sampler: SoakSampler, load: SoakLoad): SoakResult {
  const verdicts = seriesFor(opts.minutes).map((spec) => ({ spec, verdict: judgeGrowth(sampler.series.get(spec.name)!, spec.rule) }));
  const failures = verdicts.filter((v) => !v.spec.reportOnly && v.verdict.grows).map((v) => `${v.spec.name} grows: ${v.verdict.projected.toFixed(3)} projected over the run's length, over its limit ${v.verdict.limit.toFixed(3)}`);
  const c = load.counts;
  if (c.errors) failures.push(`${c.errors} load errors (first: ${load.errorSamples[0]})`);
  const missed = KINDS.map((k) => k.kind).filter((k) => !c.byKind[k]);
  if (missed.length) failures.push(`kinds never submitted: ${missed.join(', ')}`);
  for (const [what, n] of Object.entries({ 'SSE followers': c.followedBySse, 'webhook followers': c.followedByWebhook, 'polled jobs': c.followedByPolling, 'chat streams': c.chatStreams, 'inputs from outputs': c.inputsFromOutputs })) {
    if (!n) failures.push(`the load made no ${what}`);
  }
  return { verdicts, counts: c, errorSamples: load.errorSamples, failures, minutes: opts.minutes, samples: sampler.series.get(SERIES[0]!.name)!.length };
}
