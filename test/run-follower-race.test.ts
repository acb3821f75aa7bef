import assert from 'node:assert/strict';
import { RunFollower } from '../api/services/events/run-follower.js';
import { RunEventLog } from '../models/run-event-log.js';
import { TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';

/**
 * A resumed follower reads the log, then the record: a run that ends in between has its
 * terminal `status` and `done` logged by the time the record says so. They must reach the
 * client as logged, not be made up past the log's end while the logged ones, held as live
 * events, are dropped as older (the client then missed them: npm run chaos, redis-kill, saw
 * "missed ids 4,5" with made-up 6 and 7).
 */
describe('a resumed follower of a run that ends while its log is read', function () {
  const prefix = uniquePrefix('follower-race');
  let gw: TestGateway;
  before(async () => {
    gw = await new TestGateway(prefix).start();
  });
  after(async () => {
    await gw.stop();
    await cleanupPrefix(prefix);
  });

  it('passes on the logged terminal status and done, with the log numbers', async () => {
    const { key } = await gw.account(100);
    const runId = (await gw.submit(key)).body.run_id as string;
    const runs = gw.stores.runs;
    const queued = (await runs.get(runId))!;
    assert.equal((await runs.transition(queued, { from: ['queued'], to: 'running' })).ok, true);
    const running = (await runs.get(runId))!;
    const log = new RunEventLog({ redis: gw.redis, prefix, maxLength: 1000, ttlMs: 60_000 });
    await log.append(runId, [{ event: 'progress', data: { progress: 0.5 } }]);

    /** The real log, whose first read is followed by the run's end before the follower goes on. */
    class RacingLog extends RunEventLog {
      reads = 0;
      override async after(id: string, from: number, count?: number) {
        const page = await super.after(id, from, count);
        if (this.reads++ === 0) assert.equal((await runs.transition(running, { from: ['running'], to: 'succeeded' })).ok, true);
        return page;
      }
    }
    const follower = new RunFollower({ hub: gw.hub, log: new RacingLog({ redis: gw.redis, prefix, maxLength: 1000, ttlMs: 60_000 }), runs, queueState: async () => null });
    const got: string[] = [];
    await follower.follow(running, 0, { send: (e) => void got.push(`${e.id}:${e.event}`), end: () => {} });
    await until('done', async () => got.some((g) => g.endsWith(':done')));
    const logged = (await log.after(runId, 0)).map((e) => `${e.id}:${e.event}`);
    assert.deepEqual(got, logged);
  });
});
