import { monitorEventLoopDelay } from 'node:perf_hooks';
import WebSocket from 'ws';
import { PROTOCOL_VERSIONS, workerSocketUrl } from '../../sdk/protocol/index.js';
import { reconnectDelay } from '../../sdk/worker/reconnect-backoff.js';
import { answerRequests } from '../lib/ipc-child.js';

/**
 * Many lightweight simulated workers in one process, for bench/fleet.ts: each a bare `ws` client
 * speaking the wire protocol (docs/worker-protocol.md) as the SDK does on the wire (every
 * protocol version, an `identity`, one heartbeat per `heartbeat_ms`), and nothing else: no
 * engine, no SDK state, so 5,000 of them fit in one process. A lease is completed at once with
 * `{"urls": []}` and its arrival time kept for the parent. A socket that closes is opened again
 * after the SDK's own reconnect wait (sdk/worker/reconnect-backoff.ts), so a gateway restart
 * shows how the real fleet's reconnections spread.
 *
 * Requests over IPC (bench/lib/ipc-child.ts):
 *   connect {gateways, token, kind, from, count, inFlight}  opens workers from..from+count-1,
 *            worker i on gateways[i % n], at most `inFlight` registrations at a time; answers
 *            once all registered: {ms, refusals}
 *   status   {registered, byGateway, lastRegisteredAt, refusals, connectErrors}
 *   leases   the lease arrival times since the last ask, [run_id, ms][] (ms: performance.timeOrigin
 *            + performance.now(), the parent's clock)
 *   loop     this process's event-loop delay since the last ask ({p99Ms, maxMs}): a lease is
 *            stamped when its message is handled, so a late loop here would count as dispatch
 *   close    closes every socket, reconnecting none
 */
const BACKOFF = { initialDelayMs: 250, maxDelayMs: 15_000, factor: 2 };
/** As the SDK: a registration that held this long starts the backoff over. */
const STABLE_AFTER_MS = 10_000;

const now = () => performance.timeOrigin + performance.now();

interface Sim {
  i: number;
  gateway: string;
  ws?: WebSocket;
  registered: boolean;
  registeredAt: number;
  failedTries: number;
  heartbeat?: NodeJS.Timeout;
}

let token = '';
let kind = '';
let closing = false;
const sims: Sim[] = [];
let registered = 0;
let lastRegisteredAt = 0;
let refusals = 0;
let connectErrors = 0;
let leases: Array<[string, number]> = [];
/** Called at each registration while a `connect` request waits. */
let onRegistered: (() => void) | undefined;
const identityBase = `fleet-${process.pid}`;
const delay = monitorEventLoopDelay({ resolution: 5 });
delay.enable();

function open(sim: Sim): void {
  if (closing) return;
  const ws = new WebSocket(workerSocketUrl(sim.gateway), { headers: { authorization: `Bearer ${token}` }, perMessageDeflate: false });
  sim.ws = ws;
  ws.on('open', () => {
    ws.send(JSON.stringify({ type: 'register', protocol: [...PROTOCOL_VERSIONS], kinds: [kind], tier: 'open', slots: 1, identity: `${identityBase}-${sim.i}` }));
  });
  ws.on('message', (data) => {
    const frame = JSON.parse(data.toString()) as Record<string, any>;
    switch (frame.type) {
      case 'registered':
        sim.registered = true;
        sim.registeredAt = Date.now();
        registered++;
        lastRegisteredAt = now();
        sim.heartbeat = setInterval(() => ws.readyState === WebSocket.OPEN && ws.send('{"type":"heartbeat","leases":[]}'), frame.heartbeat_ms);
        onRegistered?.();
        return;
      case 'lease':
        leases.push([frame.run_id, now()]);
        ws.send(JSON.stringify({ type: 'complete', lease_id: frame.lease_id, fence: frame.fence, output: { urls: [] } }));
        return;
      case 'error':
        if (!sim.registered) refusals++;
        return;
      default:
    }
  });
  ws.on('error', () => {
    if (!sim.registered) connectErrors++;
  });
  ws.on('close', () => {
    clearInterval(sim.heartbeat);
    if (sim.registered) {
      registered--;
      if (Date.now() - sim.registeredAt >= STABLE_AFTER_MS) sim.failedTries = 0;
    }
    sim.registered = false;
    if (closing || sim.ws !== ws) return;
    setTimeout(() => open(sim), reconnectDelay(BACKOFF, sim.failedTries++));
  });
}

answerRequests({
  async connect(req) {
    const gateways = req.gateways as string[];
    token = String(req.token);
    kind = String(req.kind);
    const from = Number(req.from);
    const count = Number(req.count);
    const inFlight = Number(req.inFlight);
    const started = performance.now();
    const target = registered + count;
    let next = 0;
    // A new worker starts as each earlier one registers: at most `inFlight` registrations pending.
    const startMore = () => {
      while (next < count && sims.length - registered < inFlight) {
        const sim: Sim = { i: from + next, gateway: gateways[(from + next) % gateways.length], registered: false, registeredAt: 0, failedTries: 0 };
        next++;
        sims.push(sim);
        open(sim);
      }
    };
    await new Promise<void>((resolve) => {
      onRegistered = () => {
        startMore();
        if (registered >= target) resolve();
      };
      startMore();
    });
    onRegistered = undefined;
    return { ms: performance.now() - started, refusals, connectErrors };
  },
  status() {
    const byGateway: Record<string, number> = {};
    for (const s of sims) if (s.registered) byGateway[s.gateway] = (byGateway[s.gateway] ?? 0) + 1;
    return { registered, byGateway, lastRegisteredAt, refusals, connectErrors };
  },
  leases() {
    const taken = leases;
    leases = [];
    return { leases: taken };
  },
  loop() {
    const figures = { p99Ms: delay.percentile(99) / 1e6, maxMs: delay.max / 1e6 };
    delay.reset();
    return figures;
  },
  close() {
    closing = true;
    for (const s of sims) {
      clearInterval(s.heartbeat);
      s.ws?.terminate();
    }
    return {};
  },
});
