import http from 'node:http';
import { answerRequests } from '../lib/ipc-child.js';

/**
 * SSE clients for the sse benchmark, in their own process so their CPU is separate from the
 * server's and the publisher's, and measurable. Plain node:http (agent: false, one socket per
 * stream) and a minimal frame reader. Driven over IPC by bench/lib/sse-clients.ts:
 *   open     {urls, indexes, headers, concurrency}: one stream per index i, to urls[i % urls.length];
 *            each counts as open once its first `event:` frame (the `status`) has arrived
 *   start    resets the counters and starts recording latencies
 *   counts   frames received so far (the publisher paces itself on it)
 *   collect  the latencies recorded since `start` and the counters
 *   close    closes every stream
 * Latency: each published frame's data carries `"sent":<ms>` taken by the publisher on
 * CLOCK_MONOTONIC (process.hrtime), which every process on the machine shares; the receive
 * time is the same clock when the chunk reaches this process's JS.
 */
const nowMs = () => Number(process.hrtime.bigint()) / 1e6;
const SENT = '"sent":';

interface Stream {
  req: http.ClientRequest;
  buf: string;
  /** Id of the last frame: the next published one must be exactly one more. -1: not known yet. */
  lastId: number;
  ready?: () => void;
}

const streams: Stream[] = [];
let closing = false;
let recording = false;
let samples = new Float64Array(1 << 16);
let n = 0;
const c = { frames: 0, outOfOrder: 0, closedByServer: 0 };

function record(ms: number): void {
  if (n === samples.length) {
    const bigger = new Float64Array(samples.length * 2);
    bigger.set(samples);
    samples = bigger;
  }
  samples[n++] = ms;
}

function onFrame(s: Stream, block: string, at: number): void {
  if (block.charCodeAt(0) === 58 /* ':' */ || block.startsWith('retry:')) return; // ping, retry hint
  const id = block.startsWith('id: ') ? Number(block.slice(4, block.indexOf('\n'))) : -1;
  const sent = block.indexOf(SENT);
  if (sent < 0) {
    // The `status` frame: the stream is live, and published events follow its id.
    s.lastId = id;
    s.ready?.();
    s.ready = undefined;
    return;
  }
  c.frames++;
  if (s.lastId >= 0 && id !== s.lastId + 1) c.outOfOrder++;
  s.lastId = id;
  if (recording) record(at - parseFloat(block.slice(sent + SENT.length)));
}

function onData(s: Stream, chunk: string): void {
  const at = nowMs();
  const buf = s.buf + chunk;
  let start = 0;
  let end: number;
  while ((end = buf.indexOf('\n\n', start)) >= 0) {
    onFrame(s, buf.slice(start, end), at);
    start = end + 2;
  }
  s.buf = start === 0 ? buf : buf.slice(start);
}

/** Opens one stream; resolves with its HTTP status (200 once ready), or 0 on a socket error. */
function openStream(url: string, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve) => {
    const s = { buf: '', lastId: -1 } as Stream;
    s.req = http.get(url, { agent: false, headers: { accept: 'text/event-stream', ...headers } }, (res) => {
      if (res.statusCode !== 200) {
        res.resume();
        resolve(res.statusCode ?? 0);
        return;
      }
      res.setEncoding('utf8');
      s.ready = () => resolve(200);
      res.on('data', (chunk: string) => onData(s, chunk));
      res.on('error', () => {});
      res.once('close', () => {
        if (!closing) c.closedByServer++;
      });
    });
    s.req.once('error', () => resolve(0));
    streams.push(s);
  });
}

answerRequests({
  async open(req) {
    const urls = req.urls as string[];
    const indexes = req.indexes as number[];
    const headers = req.headers as Record<string, string>;
    const statuses: Record<string, number> = {};
    let next = 0;
    const started = performance.now();
    const worker = async () => {
      while (next < indexes.length) {
        const i = indexes[next++];
        const status = await openStream(urls[i % urls.length], headers);
        statuses[status] = (statuses[status] ?? 0) + 1;
      }
    };
    await Promise.all(Array.from({ length: Number(req.concurrency) }, worker));
    return { statuses, seconds: (performance.now() - started) / 1000 };
  },
  start() {
    n = 0;
    c.frames = 0;
    c.outOfOrder = 0;
    recording = true;
    return {};
  },
  counts() {
    return { frames: c.frames };
  },
  collect() {
    recording = false;
    const latencies = samples.slice(0, n);
    n = 0;
    return { latencies, ...c };
  },
  close() {
    closing = true;
    for (const s of streams.splice(0)) s.req.destroy();
    return {};
  },
});
