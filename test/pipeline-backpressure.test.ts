import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { GatewayProcess } from './helpers/gateway-process.js';
import { ADMIN_TOKEN, TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';
import { RankWorker } from './helpers/rank-worker.js';

const LLM = 'inference:llm:text-generate';
const MiB = 1024 * 1024;

/** The resident memory of a process, from /proc (Linux). */
const rssOf = (pid: number): number => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) * 1024;

/**
 * Back-pressure on the activation path (docs/ranks.md, "The activation path"): a last rank that
 * stops reading its socket must not make the gateway hold what rank 0 keeps sending. The gateway
 * runs in its own process, so its resident memory is its own; RANK_BUFFER_BYTES is 1 MiB.
 */
describe('pipeline back-pressure: a rank that stops reading does not grow the gateway', function () {
  this.timeout(120_000);
  const prefix = uniquePrefix('pipeline-pressure');
  let admin: TestGateway;
  let gateway: GatewayProcess;
  const workers: RankWorker[] = [];

  before(async () => {
    admin = await new TestGateway(prefix).start();
    gateway = await new GatewayProcess({ REDIS_PREFIX: prefix, RANK_BUFFER_BYTES: String(MiB) }).start();
  });
  after(async () => {
    // Terminated: rank 1's socket is paused and would never read a close handshake.
    for (const w of workers) w.terminate();
    await gateway?.kill();
    await admin.stop();
    await cleanupPrefix(prefix);
  });

  it('rank 0 sending 96 MiB to a rank 1 that reads nothing: the gateway reads on only as rank 1 takes, and its RSS stays within a few buffers', async () => {
    const { key } = await admin.account(1000);
    const token = await admin.workerToken('open');
    const declared = await admin.request('PUT', `/v1/admin/models/${LLM}/pipe-pressure`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, body: { ranks: 2 } });
    assert.ok(declared.status < 300, declared.text);
    const sender = await new RankWorker(gateway.url, token, { index: 0, count: 2, model: 'pipe-pressure', auto: false }).connect();
    const slow = await new RankWorker(gateway.url, token, { index: 1, count: 2, model: 'pipe-pressure', auto: false }).connect();
    workers.push(sender, slow);
    const res = await admin.submit(key, { kind: LLM, input: { prompt: 'pressure', model: 'pipe-pressure' } });
    assert.equal(res.status, 202, res.text);
    const [lease] = await Promise.all([sender.next((f) => f.type === 'lease'), slow.next((f) => f.type === 'lease')]);
    // A warm-up frame goes through, so the baseline includes whatever the first forward allocates.
    sender.frame(lease.lease_id, Buffer.alloc(256 * 1024, 1));
    await until('the warm-up frame reached rank 1', async () => [...slow.held.values()][0]?.received.length === 1);
    // Rank 1 stops reading its socket: from now on only the kernel's buffers take what is sent to it.
    (slow.ws as unknown as { _socket: { pause(): void } })._socket.pause();
    const baseline = rssOf(gateway.child.pid!);

    const total = 96 * MiB;
    const cap = 8 * MiB;
    const payload = Buffer.alloc(256 * 1024, 7);
    let handed = 0;
    let stop = false;
    // Rank 0 sends as fast as its own socket takes frames (up to `cap` queued in it).
    const pump = (async () => {
      while (handed < total && !stop) {
        if (sender.ws.bufferedAmount >= cap) await new Promise((r) => setTimeout(r, 5));
        else {
          sender.frame(lease.lease_id, payload);
          handed += payload.length;
        }
      }
    })();
    await until('rank 0 is held back, or sent everything', async () => sender.ws.bufferedAmount >= cap || handed >= total, 60_000);
    const grown = rssOf(gateway.child.pid!) - baseline;
    stop = true;
    await pump;
    assert.ok(handed < total, `the gateway read all ${total / MiB} MiB rank 0 sent: nothing held rank 0 back`);
    assert.ok(grown < 24 * MiB, `the gateway's RSS grew ${(grown / MiB).toFixed(1)} MiB while rank 0 had sent ${(handed / MiB).toFixed(0)} MiB (buffer 1 MiB)`);
  });
});
