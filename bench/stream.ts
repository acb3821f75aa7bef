import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { benchScratch, startBenchGateway } from './lib/bench-gateway.js';
import { ChatStreamLoad, type ChatTarget, type ChatWindow } from './lib/chat-streams.js';
import { startChildServer, stopChild } from './lib/child-server.js';
import { cpuPerJob, type CpuPerJob } from './lib/cpu-per-job.js';
import { CpuMeter, processCpuUs } from './lib/cpu.js';
import { startIpcChild } from './lib/ipc-child.js';
import { describeMachine } from './lib/machine.js';
import { number } from './lib/options.js';
import { fmt, percentile, table } from './lib/report.js';
import { startWorkerFleet } from './lib/worker-fleet.js';

/**
 * Streaming chat completions (`POST /v1/chat/completions`, `stream: true`), `streams` at once in
 * closed loops (bench/lib/chat-streams.ts, in this process), each asking for `tokens` tokens:
 *   1. switchyard: the gateway child; a worker-fleet child whose llm workers stream `max_tokens`
 *      words with no delay, one ctx.output each (HANDLER=words, the demo llm's no-delay path), or
 *      with `--source demo` run the demo engine itself (its own 20-60 words, progress, artifact;
 *      the later phases then move the average count it delivered);
 *   2. bare relay, in the same run: bench/servers/bare-relay-server.ts (node:http SSE) fed over
 *      WebSockets by bench/servers/bare-relay-producer.ts, the same chunks to the same clients;
 *   3. the peer comparison, on one mock OpenAI upstream (bench/servers/openai-upstream.ts)
 *      streaming `tokens` chunks: the clients talk to it directly, through Portkey's gateway
 *      (`--portkey DIR`, where `npm install --prefix DIR @portkey-ai/gateway` put it), and
 *      through Switchyard with workers running the openai engine against it.
 * Per phase: delivered tokens/s, time to first token (request sent -> first content chunk)
 * p50/p99, and CPU per token of the server, the token source and Redis (INFO commandstats too).
 * Goals (issue 17, docs/benchmarks.md): switchyard >= 50% of the bare relay's tokens/s; <= 60 µs
 * gateway and <= 5 µs Redis CPU per token; TTFT p50 within 15 ms of the bare relay's; against
 * Portkey on the same upstream, more tokens/s and added TTFT p50 <= Portkey's + 10 ms.
 */
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const LLM_KIND = 'inference:llm:text-generate';
const UPSTREAM_MODEL = 'bench-model';
const GOALS = { ratio: 0.5, gatewayUsPerToken: 60, redisUsPerToken: 5, ttftP50OverBareMs: 15, addedTtftOverPortkeyMs: 10 };

interface Options {
  streams: number;
  tokens: number;
  /** `words`: workers stream exactly `tokens` words; `demo`: the demo engine itself (its own 20-60 words, progress events, a completion.txt artifact). */
  source: 'words' | 'demo';
  duration: number;
  warmup: number;
  workers: number;
  slots: number;
  peerStreams: number;
  portkey?: string;
  peer: boolean;
  json: boolean;
  profileDir?: string;
}

function parseOptions(args: string[]): Options {
  const { values } = parseArgs({
    args,
    options: {
      streams: { type: 'string', default: '64' },
      tokens: { type: 'string', default: '64' },
      source: { type: 'string', default: 'words' },
      duration: { type: 'string', default: '10' },
      warmup: { type: 'string', default: '2' },
      workers: { type: 'string', default: '8' },
      slots: { type: 'string', default: '8' },
      'peer-streams': { type: 'string' },
      portkey: { type: 'string' },
      'no-peer': { type: 'boolean', default: false },
      json: { type: 'boolean', default: false },
      profile: { type: 'string' },
    },
  });
  const num = number;
  const streams = Math.round(num('streams', values.streams, 1));
  if (values.source !== 'words' && values.source !== 'demo') throw new Error(`--source must be words or demo (got ${JSON.stringify(values.source)})`);
  return {
    streams,
    tokens: Math.round(num('tokens', values.tokens, 1)),
    source: values.source,
    duration: num('duration', values.duration, 1),
    warmup: num('warmup', values.warmup, 0),
    workers: Math.round(num('workers', values.workers, 1)),
    slots: Math.min(64, Math.round(num('slots', values.slots, 1))),
    peerStreams: values['peer-streams'] === undefined ? streams : Math.round(num('peer-streams', values['peer-streams'], 1)),
    portkey: values.portkey ?? process.env.PORTKEY_DIR,
    peer: !values['no-peer'],
    json: values.json,
    profileDir: values.profile ?? process.env.BENCH_PROFILE_DIR,
  };
}

/** One measured phase: what the clients saw, and the CPU of the server and of the token source per token. */
interface PhaseResult {
  name: string;
  streams: number;
  tokensPerSec: number;
  completionsPerSec: number;
  ttftP50Ms: number;
  ttftP99Ms: number;
  window: Omit<ChatWindow, 'ttftMs'>;
  /** Per token: processUsPerJob is the server child's (gateway, relay) µs per token. */
  cpu?: CpuPerJob;
  /** The token source's process (worker fleet, producers, the upstream behind a relay), µs per token. */
  sourceUsPerToken: number;
  /** Machine busy time none of server, source, Redis and this process account for (other programs, kernel), in cores. */
  otherCores: number;
}

/**
 * Runs the load against `target` for the warm-up, then measures `duration` s: the clients' window,
 * the CPU of `serverPid` (and Redis) through the meter, and of `sourcePid`.
 */
async function measure(name: string, target: ChatTarget, streams: number, o: Options, meter: CpuMeter, serverPid: number, sourcePid: number | undefined, cores: number, log: (m: string) => void): Promise<PhaseResult> {
  log(`  ${name}: ${streams} streams x ${target.tokens} tokens, ${o.warmup} s warm-up, ${o.duration} s measured`);
  const load = new ChatStreamLoad(target, streams);
  try {
    await sleep(o.warmup * 1000);
    const stopCpu = await meter.window(serverPid)();
    const sourceCpu = () => (sourcePid === undefined ? 0 : processCpuUs(sourcePid));
    const source0 = sourceCpu();
    const end = load.window();
    await sleep(o.duration * 1000);
    const w = end();
    const sourceUs = sourceCpu() - source0;
    const c = await stopCpu();
    const { ttftMs, ...window } = w;
    return {
      name,
      streams,
      tokensPerSec: w.tokens / w.seconds,
      completionsPerSec: w.completions / w.seconds,
      ttftP50Ms: percentile(ttftMs, 0.5),
      ttftP99Ms: percentile(ttftMs, 0.99),
      window,
      cpu: cpuPerJob({ name, jobs: w.tokens, seconds: w.seconds, jobsPerSec: w.tokens / w.seconds, p50Ms: NaN, p99Ms: NaN, non2xx: 0, errors: w.errors, statusCodes: { 200: w.completions }, cpu: c }, cores),
      sourceUsPerToken: sourceUs / w.tokens,
      otherCores: (c.machineBusyUs - c.serverUs! - sourceUs - c.redisUs - c.parentUs) / c.wallUs,
    };
  } finally {
    await load.stop();
  }
}

/** A gateway child (its own prefix) with `workers` x `slots` llm workers of `handler` in a fleet child. */
async function switchyard(o: Options, prefix: string, dataDir: string, stoppers: Array<() => Promise<void>>, fleet: { handler: 'words' | 'demo' | 'openai'; backendUrl?: string }, profileDir?: string) {
  const { server: gw, apiKey, workerToken } = await startBenchGateway({ redisUrl: REDIS_URL, prefix, dataDir, profileDir });
  stoppers.push(() => gw.stop());
  // The fleet's profile goes into its own folder, named by what it ran, beside the gateway's.
  const fleetProfileDir = profileDir && path.join(profileDir, `worker-fleet-${fleet.handler}`);
  const workers = await startWorkerFleet({ gateway: gw.url, token: workerToken, workers: o.workers, slots: o.slots, kind: LLM_KIND, ...fleet, profileDir: fleetProfileDir });
  stoppers.push(() => workers.stop());
  return { gw, fleet: workers, headers: { authorization: `Bearer ${apiKey}` } };
}

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as net.AddressInfo;
  await new Promise((r) => s.close(r));
  return port;
}

/** Portkey's node server (build/start-server.js of @portkey-ai/gateway under `dir`) on a free port; undefined when absent. */
async function startPortkey(dir: string, stoppers: Array<() => Promise<void>>): Promise<{ url: string; pid: number } | undefined> {
  const script = path.join(dir, 'node_modules', '@portkey-ai', 'gateway', 'build', 'start-server.js');
  if (!existsSync(script)) return undefined;
  const port = await freePort();
  const child = spawn(process.execPath, [script, `--port=${port}`, '--headless'], { cwd: dir, env: { ...process.env, NODE_ENV: 'production' }, stdio: ['ignore', 'ignore', 'inherit'] });
  stoppers.push(() => stopChild(child));
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 150; i++) {
    if (child.exitCode !== null) throw new Error(`portkey exited (code ${child.exitCode})`);
    if (await fetch(url).then((r) => r.ok, () => false)) return { url, pid: child.pid! };
    await sleep(200);
  }
  throw new Error('portkey did not answer within 30 s');
}

/** One streaming completion to `target`: undefined when it streamed, else what it answered. */
async function probeStream(target: ChatTarget): Promise<string | undefined> {
  const res = await fetch(target.url, { method: 'POST', headers: { ...target.headers, 'content-type': 'application/json' }, body: JSON.stringify({ model: target.model, messages: [{ role: 'user', content: 'hi' }], stream: true, max_tokens: 2 }) });
  const text = await res.text();
  return res.status === 200 && text.includes('[DONE]') ? undefined : `${res.status} ${text.slice(0, 200)}`;
}

interface PeerRow extends PhaseResult {
  /** TTFT p50 minus the direct path's; tokens/s over the direct path's. */
  addedTtftP50Ms: number;
  addedTtftP99Ms: number;
  tokensVsDirect: number;
}

export default async function stream(args: string[]): Promise<number> {
  const o = parseOptions(args);
  const { prefix, dataDir, stoppers, cleanup } = await benchScratch('stream', REDIS_URL);
  const log = (msg: string) => o.json || console.error(msg);
  const meter = new CpuMeter(REDIS_URL);
  const stopAll = async () => {
    for (const stop of stoppers.splice(0).reverse()) await stop();
  };

  try {
    const machine = await describeMachine(REDIS_URL);
    log(`stream: ${o.streams} streams x ${o.tokens} tokens; ${o.workers} workers x ${o.slots} slots; Redis prefix ${prefix}`);

    // ---- 1. switchyard, demo llm words ----------------------------------------------------------
    let tokens = o.tokens;
    const body = (url: string, headers: Record<string, string>, model: string): ChatTarget => ({ url: `${url}/chat/completions`, headers, model, tokens });
    log(`phase 1: switchyard (gateway + llm workers streaming with no delay: ${o.source === 'demo' ? 'the demo engine' : `${o.tokens} words each`})`);
    const sy = await switchyard(o, `${prefix}:gw`, dataDir, stoppers, { handler: o.source }, o.profileDir);
    // The demo engine writes 20 to 60 words whatever max_tokens (256) allows; any count is right.
    const syTarget = o.source === 'demo' ? { ...body(`${sy.gw.url}/v1`, sy.headers, 'default'), tokens: 256, expectTokens: 1 } : body(`${sy.gw.url}/v1`, sy.headers, 'default');
    const gateway = await measure('switchyard', syTarget, o.streams, o, meter, sy.gw.pid, sy.fleet.pid, machine.cpus, log);
    await stopAll();
    // The other phases move as many chunks per completion as the gateway delivered.
    if (o.source === 'demo') tokens = Math.max(1, Math.round(gateway.window.tokens / Math.max(1, gateway.window.completions)));

    // ---- 2. bare relay ----------------------------------------------------------------------------
    log('phase 2: bare relay (WebSocket producers -> node:http SSE)');
    const relay = await startChildServer('bare-relay-server.ts', {});
    stoppers.push(() => relay.stop());
    const producers = await startIpcChild('servers/bare-relay-producer.ts', { env: { RELAY_URL: `${relay.url.replace('http', 'ws')}/producer`, PRODUCERS: String(o.workers) } });
    stoppers.push(() => producers.stop());
    while ((await (await fetch(`${relay.url}/producers`)).text()) !== String(o.workers)) await sleep(50);
    const bare = await measure('bare relay', body(`${relay.url}/v1`, {}, 'bare'), o.streams, o, meter, relay.pid, producers.pid, machine.cpus, log);
    await stopAll();

    // ---- 3. peer comparison on one mock upstream ------------------------------------------------
    let peers: PeerRow[] = [];
    let portkeyNote: string | undefined;
    if (o.peer) {
      log(`phase 3: peer comparison on a mock OpenAI upstream, ${o.peerStreams} streams`);
      const upstream = await startChildServer('openai-upstream.ts', { MODEL: UPSTREAM_MODEL });
      stoppers.push(() => upstream.stop());
      const rows: PhaseResult[] = [];
      // Direct: the upstream is the server; there is no separate token source.
      rows.push(await measure('direct to upstream', body(upstream.url, {}, UPSTREAM_MODEL), o.peerStreams, o, meter, upstream.pid, undefined, machine.cpus, log));
      const portkey = o.portkey ? await startPortkey(o.portkey, stoppers) : undefined;
      const headers = { authorization: 'Bearer sk-bench', 'x-portkey-provider': 'openai', 'x-portkey-custom-host': upstream.url };
      const portkeyTarget = portkey && body(`${portkey.url}/v1`, headers, UPSTREAM_MODEL);
      const probe = portkeyTarget && (await probeStream(portkeyTarget));
      if (portkey && portkeyTarget && !probe) {
        rows.push(await measure('Portkey gateway', portkeyTarget, o.peerStreams, o, meter, portkey.pid, upstream.pid, machine.cpus, log));
      } else if (probe) {
        portkeyNote = `failed: a streaming completion through it answered ${probe} (Portkey 1.15.2 with @hono/node-server 1.19.19 answers every stream 500, "TypeError: immutable": docs/benchmarks.md says how to install it)`;
        log(`  Portkey ${portkeyNote}`);
      } else {
        portkeyNote = `skipped: install @portkey-ai/gateway into a directory as docs/benchmarks.md (stream) says (npm install --prefix DIR, with @hono/node-server 2.1.9), then pass --portkey DIR${o.portkey ? ` (nothing at ${o.portkey})` : ''}`;
        log(`  Portkey ${portkeyNote}`);
      }
      const oa = await switchyard(o, `${prefix}:oa`, dataDir, stoppers, { handler: 'openai', backendUrl: upstream.url }, o.profileDir && path.join(o.profileDir, 'openai'));
      const syRow = await measure('switchyard + openai engine', body(`${oa.gw.url}/v1`, oa.headers, UPSTREAM_MODEL), o.peerStreams, o, meter, oa.gw.pid, oa.fleet.pid, machine.cpus, log);
      rows.push(syRow);
      await stopAll();
      const direct = rows[0];
      peers = rows.map((r) => ({ ...r, addedTtftP50Ms: r.ttftP50Ms - direct.ttftP50Ms, addedTtftP99Ms: r.ttftP99Ms - direct.ttftP99Ms, tokensVsDirect: r.tokensPerSec / direct.tokensPerSec }));
    }

    const ratio = gateway.tokensPerSec / bare.tokensPerSec;
    const pk = peers.find((p) => p.name === 'Portkey gateway');
    const so = peers.find((p) => p.name === 'switchyard + openai engine');
    const goals = {
      ratio: ratio >= GOALS.ratio,
      gatewayCpu: (gateway.cpu?.processUsPerJob ?? Infinity) <= GOALS.gatewayUsPerToken,
      redisCpu: (gateway.cpu?.redisUsPerJob ?? Infinity) <= GOALS.redisUsPerToken,
      ttft: gateway.ttftP50Ms - bare.ttftP50Ms <= GOALS.ttftP50OverBareMs,
      portkeyTokens: pk && so ? so.tokensPerSec > pk.tokensPerSec : undefined,
      portkeyTtft: pk && so ? so.addedTtftP50Ms <= pk.addedTtftP50Ms + GOALS.addedTtftOverPortkeyMs : undefined,
    };
    if (o.json) {
      console.log(JSON.stringify({ benchmark: 'stream', machine, options: o, tokensPerCompletion: tokens, phases: [gateway, bare], ratio, peers, portkey: portkeyNote, goals }, null, 2));
      return 0;
    }
    console.log(`\nmachine: ${machine.cpus} cores (${machine.cpuModel}), Node ${machine.node}, Redis ${machine.redis}`);
    console.log(report(o, tokens, [gateway, bare], ratio, peers, portkeyNote, goals));
    return 0;
  } finally {
    meter.close();
    await cleanup();
  }
}

function report(o: Options, tokens: number, phases: PhaseResult[], ratio: number, peers: PeerRow[], portkeyNote: string | undefined, goals: Record<string, boolean | undefined>): string {
  const ms = (n: number) => fmt(n, 1);
  const us = (n: number | undefined) => (n === undefined || !Number.isFinite(n) ? '-' : fmt(n, 1));
  const met = (b: boolean | undefined) => (b === undefined ? 'not measured' : b ? 'met' : 'NOT met');
  const problems = (p: PhaseResult) => (p.window.errors ? `${p.window.errors} errors (first: ${p.window.firstError})` : '');
  const out: string[] = [];
  out.push(`${o.streams} concurrent streaming chat completions of ${o.source === 'demo' ? `the demo engine's text (${tokens} tokens each on average; the relay sends ${tokens})` : `${tokens} tokens each`}, ${o.duration} s measured after ${o.warmup} s`);
  out.push(
    table(
      ['phase', 'tokens/s', 'completions/s', 'TTFT p50 ms', 'TTFT p99 ms', 'server µs/token', 'its main thread', 'source µs/token', 'Redis µs/token', 'Redis main', 'load gen µs/token', 'busy cores', 'other cores'],
      phases.map((p) => {
        const c = p.cpu;
        const loadGen = c?.loadGenUsPerRequest === undefined ? undefined : (c.loadGenUsPerRequest * p.window.completions) / p.window.tokens;
        return [p.name, fmt(p.tokensPerSec), fmt(p.completionsPerSec), ms(p.ttftP50Ms), ms(p.ttftP99Ms), us(c?.processUsPerJob), us(c?.processMainThreadUsPerJob), us(p.sourceUsPerToken), us(c?.redisUsPerJob), us(c?.redisMainThreadUsPerJob), us(loadGen), c ? fmt(c.busyCores, 2) : '-', fmt(p.otherCores, 2)];
      }),
    ),
  );
  out.push('(server: the gateway or relay child, all threads; source: the worker-fleet or producer child; load gen: this process, the clients; Redis is shared;\n other cores: machine busy time none of these account for: other programs on this shared machine, kernel)');
  for (const p of phases) if (problems(p)) out.push(`${p.name}: ${problems(p)}`);
  const [g, b] = phases;
  out.push('');
  out.push(`switchyard / bare relay tokens/s: ${fmt(ratio * 100, 1)}%  goal >= ${GOALS.ratio * 100}%: ${met(goals.ratio)}`);
  out.push(`gateway CPU per token: ${us(g.cpu?.processUsPerJob)} µs  goal <= ${GOALS.gatewayUsPerToken} µs: ${met(goals.gatewayCpu)}`);
  out.push(`Redis CPU per token: ${us(g.cpu?.redisUsPerJob)} µs  goal <= ${GOALS.redisUsPerToken} µs: ${met(goals.redisCpu)}`);
  out.push(`TTFT p50 over the bare relay's: ${ms(g.ttftP50Ms - b.ttftP50Ms)} ms  goal <= ${GOALS.ttftP50OverBareMs} ms: ${met(goals.ttft)}`);
  if (g.cpu) {
    out.push(`Redis commands per token, switchyard: ${g.cpu.redisCommands.slice(0, 8).map((x) => `${x.name} ${us(x.usPerJob)} µs (${fmt(x.callsPerJob, 2)} calls)`).join(', ')}`);
    out.push('(command time excludes socket I/O; commands a Lua script runs also count inside its evalsha)');
    const perCompletion = g.window.tokens / Math.max(1, g.window.completions);
    out.push(`per completion (${fmt(perCompletion, 1)} tokens): gateway ${fmt((g.cpu.processUsPerJob * perCompletion) / 1000, 2)} ms CPU, Redis ${fmt((g.cpu.redisUsPerJob * perCompletion) / 1000, 2)} ms`);
    out.push(`caps: the gateway's event loop allows ${fmt(g.cpu.eventLoopCapJobsPerSec)} tokens/s, Redis's main thread ${fmt(g.cpu.redisThreadCapJobsPerSec)} tokens/s`);
  }
  if (peers.length) {
    out.push('');
    out.push(`peer comparison: one mock OpenAI upstream streaming ${tokens} chunks, ${o.peerStreams} streams`);
    out.push(
      table(
        ['path', 'tokens/s', 'of direct', 'TTFT p50 ms', 'TTFT p99 ms', 'added p50 ms', 'added p99 ms', 'relay µs/token', 'behind it µs/token', 'Redis µs/token', 'other cores', 'errors'],
        peers.map((p) => [p.name, fmt(p.tokensPerSec), `${fmt(p.tokensVsDirect * 100, 1)}%`, ms(p.ttftP50Ms), ms(p.ttftP99Ms), ms(p.addedTtftP50Ms), ms(p.addedTtftP99Ms), us(p.cpu?.processUsPerJob), p.name.startsWith('direct') ? '-' : us(p.sourceUsPerToken), us(p.cpu?.redisUsPerJob), fmt(p.otherCores, 2), fmt(p.window.errors)]),
      ),
    );
    out.push('(relay: the upstream itself for direct, the Portkey process, or the gateway; behind it: the upstream for Portkey, the worker fleet (openai engine) for switchyard, which the upstream\'s CPU is not counted in)');
    for (const p of peers) if (problems(p)) out.push(`${p.name}: ${problems(p)}`);
    if (portkeyNote) out.push(`Portkey ${portkeyNote}`);
    out.push(`vs Portkey: more tokens/s: ${met(goals.portkeyTokens)}; added TTFT p50 <= Portkey's + ${GOALS.addedTtftOverPortkeyMs} ms: ${met(goals.portkeyTtft)}`);
  }
  return out.join('\n');
}
