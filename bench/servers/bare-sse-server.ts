import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import { RunEventLog } from '../../models/run-event-log.js';

/**
 * The reference for the sse benchmark: the least a server can do to fan run events out over
 * SSE. Plain node:http, no framework, no auth, no replay, no pings. GET /runs/<id>/events
 * answers text/event-stream and keeps the response in a Set per run; one ioredis subscriber
 * SUBSCRIBEs the run's channel (`${REDIS_PREFIX}:ev:<id>`, the gateway's channel and the
 * message RunEventLog.append publishes) while the run has clients, and writes each message
 * as one `id/event/data` frame, built once, to every client of the run. Once the
 * subscription is confirmed a client gets `event: status` (empty data), so it knows events
 * published from then on reach it, as the gateway's first `status` frame tells.
 * Env: REDIS_URL, REDIS_PREFIX. Prints {"url"} once listening; SIGTERM stops it.
 */
const prefix = process.env.REDIS_PREFIX;
if (!prefix) throw new Error('bare-sse-server: REDIS_PREFIX is required');
const channelPrefix = `${prefix}:ev:`;

interface Run {
  clients: Set<http.ServerResponse>;
  subscribed: Promise<unknown>;
}
const runs = new Map<string, Run>();

const subscriber = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
subscriber.on('message', (channel: string, message: string) => {
  const run = runs.get(channel.slice(channelPrefix.length));
  if (!run) return;
  for (const e of RunEventLog.parseMessage(message)) {
    const frame = `id: ${e.id}\nevent: ${e.event}\ndata: ${e.data}\n\n`;
    for (const res of run.clients) res.write(frame);
  }
});

const ROUTE = /^\/runs\/([^/?]+)\/events$/;

const server = http.createServer({ requestTimeout: 0 }, (req, res) => {
  const runId = req.method === 'GET' ? ROUTE.exec(req.url ?? '')?.[1] : undefined;
  if (!runId) {
    res.writeHead(404).end();
    return;
  }
  res.writeHead(200, { 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-cache', Connection: 'keep-alive' });
  res.socket?.setNoDelay(true); // as the gateway does: a frame goes out when written
  let run = runs.get(runId);
  if (!run) {
    run = { clients: new Set(), subscribed: subscriber.subscribe(channelPrefix + runId) };
    runs.set(runId, run);
  }
  const r = run;
  r.clients.add(res);
  res.once('close', () => {
    r.clients.delete(res);
    if (r.clients.size > 0 || runs.get(runId) !== r) return;
    runs.delete(runId);
    subscriber.unsubscribe(channelPrefix + runId).catch(() => {});
  });
  r.subscribed.then(
    () => res.write('event: status\ndata: {}\n\n'),
    () => res.destroy(),
  );
});

server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${port}` })}\n`);
});

process.once('SIGTERM', () => {
  server.close(() => {
    subscriber.disconnect();
    process.exit(0);
  });
  server.closeAllConnections();
});
