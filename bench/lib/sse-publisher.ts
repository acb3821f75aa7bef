import { setTimeout as sleep } from 'node:timers/promises';
import type { RedisClient } from '../../models/redis-connection.js';
import { RunEventLog } from '../../models/run-event-log.js';

/** CLOCK_MONOTONIC in ms: the same clock in every process on the machine. */
export const monotonicMs = () => Number(process.hrtime.bigint()) / 1e6;

/**
 * Appends `log` events to runs through RunEventLog.append — the gateway's own path: one Lua
 * call numbers the event, XADDs it to the run's capped stream and PUBLISHes it on the run's
 * channel. Event i goes to run i % runs. Each event's data carries `sent`, the publish time
 * (monotonicMs() just before the call), which the clients subtract from their receive time.
 */
export class EventPublisher {
  private readonly log: RunEventLog;
  published = 0;
  /** Frames the clients should receive for what was published: the sum of each event's run's streams. */
  expectedFrames = 0;
  errors = 0;
  inFlight = 0;

  constructor(
    redis: RedisClient,
    prefix: string,
    private readonly runIds: string[],
    /** Streams open per run (index as runIds). */
    private readonly streamsPerRun: number[],
  ) {
    // The gateway's defaults: EVENT_LOG_MAX 10000; a TTL the run outlives the benchmark with.
    this.log = new RunEventLog({ redis, prefix, maxLength: 10_000, ttlMs: 3_600_000 });
  }

  publish(): void {
    const i = this.published++;
    const r = i % this.runIds.length;
    this.expectedFrames += this.streamsPerRun[r];
    this.inFlight++;
    const data = { line: `bench line ${i}`, ts: new Date().toISOString(), sent: monotonicMs() };
    this.log.append(this.runIds[r], [{ event: 'log', data }]).then(
      () => this.inFlight--,
      () => (this.inFlight--, this.errors++),
    );
  }

  /** Open loop: `rate` events/s for `seconds`, each on its schedule whatever the deliveries do. */
  async paced(rate: number, seconds: number): Promise<void> {
    const total = Math.round(rate * seconds);
    const t0 = performance.now();
    for (let i = 0; i < total; ) {
      const due = Math.min(total, Math.floor(((performance.now() - t0) * rate) / 1000) + 1);
      while (i < due) {
        this.publish();
        i++;
      }
      await sleep(1);
    }
  }

  /**
   * As fast as the clients take it: keeps at most `windowFrames` frames published but not yet
   * received (`frames()` is the clients' count, polled every 2 ms), until `running()` is false.
   * Also at most 5,000 appends wait on Redis at a time.
   */
  async saturate(frames: () => Promise<number>, windowFrames: number, running: () => boolean): Promise<void> {
    while (running()) {
      const got = await frames();
      while (this.expectedFrames - got < windowFrames && this.inFlight < 5_000) this.publish();
      await sleep(2);
    }
  }

  /** Resolves once Redis has answered every append. */
  async settled(): Promise<void> {
    while (this.inFlight > 0) await sleep(5);
  }
}
