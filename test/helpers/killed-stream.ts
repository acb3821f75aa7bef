import assert from 'node:assert/strict';
import { RunEventLog } from '../../models/run-event-log.js';
import { GatewayProcess } from './gateway-process.js';
import { TestGateway, cleanupPrefix, uniquePrefix } from './harness.js';
import { RawWorker, type Frame } from './raw-worker.js';
import { SseClient, type SseFrame } from './sse-client.js';

/** `n` distinct deltas: `d0 `, `d1 `, ... */
export const deltas = (n: number, tag = 'd') => Array.from({ length: n }, (_, i) => `${tag}${i} `);

/** The text of the output events among `frames`. */
export const outputText = (frames: SseFrame[]) =>
  frames
    .filter((f) => f.event === 'output')
    .map((f) => f.data.delta)
    .join('');

/** The deltas of a run's logged output events, in log order. */
export const loggedOutputs = async (log: RunEventLog, runId: string) =>
  (await log.after(runId, 0, 10_000)).filter((e) => e.event === 'output').map((e) => JSON.parse(e.data).delta as string);

/**
 * Two gateways on one Redis prefix: `doomed`, a child process a test SIGKILLs mid-stream, and
 * `survivor`, in the test's process, where the worker and the client go on. Registers its own
 * mocha hooks; one kill per describe block.
 */
export class KilledGatewayFixture {
  readonly prefix: string;
  survivor!: TestGateway;
  doomed!: GatewayProcess;
  readonly sockets: RawWorker[] = [];

  constructor(name: string) {
    this.prefix = uniquePrefix(name);
    before(async () => {
      this.survivor = await new TestGateway(this.prefix, { LEASE_TTL_MS: '10000' }).start();
      this.doomed = new GatewayProcess({ REDIS_PREFIX: this.prefix, LEASE_TTL_MS: '10000' });
      await this.doomed.start();
    });
    after(async () => {
      for (const w of this.sockets.splice(0)) w.terminate();
      await this.doomed?.kill();
      await this.survivor?.stop();
      await cleanupPrefix(this.prefix);
    });
  }

  /**
   * A worker registered with `register` on the doomed gateway leases a job, a client follows it
   * there, and the worker sends 400 deltas (numbered when `seq`): the first 200; once one of
   * them is acknowledged the gateway is frozen (SIGSTOP), the other 200 are sent and it is
   * SIGKILLed. So some deltas are acknowledged, some of the first half may be logged with their
   * acks never sent, and the second half is never read, however loaded the machine. (Firing the
   * kill at the first ack of all 400 let a busy gateway log and acknowledge every delta first;
   * sending the second half before a kill without the freeze let it acknowledge the first of
   * them while the rest were still being written.)
   */
  async streamUntilKilled(register: Record<string, unknown>, opts: { seq: boolean }) {
    const { key } = await this.survivor.account(100);
    const token = await this.survivor.workerToken();
    const w1 = await new RawWorker(this.doomed.url, token).connect(register);
    this.sockets.push(w1);
    const runId: string = (await this.survivor.submit(key)).body.run_id;
    const lease: Frame = await w1.lease();
    const client = await new SseClient(`${this.doomed.url}/v1/jobs/${runId}/events`, key).open();
    await client.until((c) => c.frames.length >= 1);

    const sent = deltas(400);
    const half = sent.length / 2;
    let acked = 0;
    let firstAck!: () => void;
    const firstAcked = new Promise<void>((resolve) => (firstAck = resolve));
    w1.ws.on('message', (data) => {
      const f = JSON.parse(data.toString()) as Frame;
      if (f.type !== 'ack' || f.of !== 'output') return;
      acked += f.count ?? 1;
      firstAck();
    });
    const send = (delta: string, i: number) =>
      w1.send({ type: 'output', lease_id: lease.lease_id, fence: lease.fence, delta, ...(opts.seq ? { seq: i + 1 } : {}) });
    sent.slice(0, half).forEach((delta, i) => send(delta, i));
    await firstAcked;
    this.doomed.signal('SIGSTOP');
    sent.slice(half).forEach((delta, i) => send(delta, half + i));
    const killed = this.doomed.kill();
    await killed;
    await w1.closed;
    assert.ok(acked <= half, `killed mid-stream: nothing of the second half acknowledged (${acked} acks)`);
    const eventLog = new RunEventLog({ redis: this.survivor.redis, prefix: this.prefix, maxLength: 100_000, ttlMs: 60_000 });
    return { key, token, runId, lease, client, sent, acked, eventLog };
  }

  /** The worker's second socket, on the survivor, taking its lease over with protocol 2's resume. */
  async resumeOnSurvivor(token: string, register: Record<string, unknown>, lease: Frame): Promise<RawWorker> {
    const w2 = await new RawWorker(this.survivor.url, token).connect({ ...register, resume: [{ lease_id: lease.lease_id, fence: lease.fence, upload_token: lease.upload_token }] });
    this.sockets.push(w2);
    return w2;
  }
}
