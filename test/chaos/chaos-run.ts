import { RedisKeys } from '../../models/redis/keys.js';
import { CarefulClient } from './careful-client.js';
import type { RedisClient } from '../../models/redis-connection.js';
import { ChaosCluster } from './chaos-cluster.js';
import { readFinalState } from './final-state.js';
import type { ChaosHistory, OutageWindow } from './history.js';
import { checkHistory, RECOVERY_BOUND_S, type ChaosVerdict } from './invariants.js';
import type { Sabotage } from './sabotage.js';
import type { Scenario } from './scenarios.js';
import { SseFollower } from './sse-follower.js';
import { TerminalWatcher } from './terminal-watcher.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface RunOptions {
  redisBin: string;
  /** One redis-server (default) or a Redis Cluster with S3 storage (ChaosCluster's `target`; needs `cliBin`). */
  target?: 'server' | 'cluster';
  cliBin?: string;
  /** The scenarios injected together (one for a plain run, several for --mixed). */
  scenarios: Scenario[];
  label?: string;
  workers?: number;
  /** Load and quiet phases, in ms. */
  warmupMs?: number;
  afterMs?: number;
  submitEveryMs?: number;
  /** Every n-th accepted run gets an SSE follower. */
  followEvery?: number;
  sabotage?: Sabotage;
  log?: (line: string) => void;
}

/**
 * One chaos run: a fresh cluster, a steady careful load with SSE followers whose front doors
 * are flapped every second (so every follower resumes), the scenario's faults while the load
 * runs, the load stopped, the system left to settle, then the history read and checked.
 */
export async function runChaos(o: RunOptions): Promise<ChaosVerdict> {
  const log = o.log ?? (() => {});
  const label = o.label ?? o.scenarios.map((s) => s.name).join('+');
  const dataDir = o.scenarios.map((s) => s.dataDir?.()).find((d) => d) ?? undefined;
  const cluster = new ChaosCluster({ redisBin: o.redisBin, target: o.target, cliBin: o.cliBin, workers: o.workers ?? 4, demoDelayMs: 300, dataDir });
  const outages: OutageWindow[] = [];
  const followers: SseFollower[] = [];
  let tamper: RedisClient | null = null;
  try {
    await cluster.start();
    tamper = cluster.tamperClient();
    const startedAt = Date.now();
    const client = new CarefulClient(cluster.frontUrls, cluster.apiKey);
    const watcher = new TerminalWatcher(client.accepted, () => cluster.gateways.find((g) => g)?.url ?? null, cluster.apiKey);
    let followed = 0;
    const followNew = setInterval(() => {
      const ids = [...client.accepted.keys()];
      for (; followed < ids.length; followed++) {
        if (followed % (o.followEvery ?? 5) === 0) followers.push(new SseFollower(cluster.frontUrls, cluster.apiKey, ids[followed]));
      }
    }, 100);
    // Followers' connections (and submissions in flight) are reset once a second: every follower
    // resumes with Last-Event-ID at least once, whatever the scenario.
    const flap = setInterval(() => cluster.fronts.forEach((f) => f.dropAll()), 1000);
    client.startLoad(o.submitEveryMs ?? 100);
    watcher.start();
    await sleep(o.warmupMs ?? 3000);

    log(`${label}: injecting`);
    const ctx = { cluster, outage: (what: string, from: number, graceMs = 0) => outages.push({ what, from, to: Date.now() + graceMs }) };
    const faults = Promise.all(o.scenarios.map((s) => s.inject(ctx)));
    let planted = '';
    if (o.sabotage?.duringFault) {
      await sleep(300);
      planted = await o.sabotage.duringFault(cluster, tamper, client.accepted);
    }
    await faults;
    const faultEndedAt = Date.now();
    log(`${label}: fault over; load continues`);
    await sleep(o.afterMs ?? 3000);
    await client.stop();
    clearInterval(followNew);
    clearInterval(flap);

    // Settle: wait until every accepted run is seen terminal, at most the recovery bound.
    const settleBy = faultEndedAt + RECOVERY_BOUND_S * 1000;
    while (watcher.pending().length > 0 && Date.now() < settleBy) await sleep(250);
    watcher.stop();
    await watcher.sweep();
    // Followers of ended runs finish on their own; the rest are stopped (their runs count as lost).
    await Promise.race([Promise.all(followers.map((f) => f.finished)), sleep(5000)]);
    followers.forEach((f) => f.stop());
    // Reserved credits return when a run settles, in the same step: nothing to wait for.

    if (o.sabotage?.atRest) planted = await o.sabotage.atRest(cluster, tamper, client.accepted);
    if (planted) log(`${label}: sabotage ${o.sabotage!.name}: ${planted}`);

    const final = await readFinalState(cluster.directUrl, cluster.apiKey, watcher.terminalAt);
    const history: ChaosHistory = {
      scenario: o.sabotage ? `${label} (sabotage ${o.sabotage.name})` : label,
      startedAt,
      submits: client.attempts,
      accepted: client.accepted,
      runsByKey: client.runsByKey,
      followers: followers.map((f) => f.record),
      outages,
      faultEndedAt,
      account: { id: cluster.accountId, startCredits: cluster.startCredits, credits: final.credits, reserved: final.reserved },
      final: final.runs,
      unanswered: client.unanswered,
    };
    const verdict = checkHistory(history);
    // A run no answer named: say which Idempotency-Key made it and what that key was answered with.
    for (const id of [...final.runs.keys()].filter((r) => !client.accepted.has(r)).slice(0, 5)) {
      const doc = JSON.parse((await tamper.hget(new RedisKeys(cluster.keyPrefix).run(id), 'doc')) ?? '{}') as { idempotency_key?: string };
      const key = doc.idempotency_key ?? '';
      const answered = [...(client.runsByKey.get(key) ?? [])].join(',');
      const tries = client.attempts.filter((a) => a.key === key).map((a) => `${a.status || 'neterr'}@+${a.at - startedAt}`).join(' ');
      verdict.violations.push(`unnamed run ${id}: made for Idempotency-Key ${key}, which was answered ${answered || 'nothing'}; its attempts: ${tries}`);
    }
    if (process.env.CHAOS_DEBUG) {
      for (const g of cluster.gateways) for (const l of g?.lines ?? []) if ((l.level ?? 0) >= 40 || (l.status ?? 0) >= 400) log(`gateway: ${JSON.stringify(l).slice(0, 400)}`);
    }
    const outcomes: Record<string, number> = {};
    for (const r of final.runs.values()) {
      const outcome = r.errorCode ? `${r.status}:${r.errorCode}` : r.status;
      outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
    }
    const answers: Record<string, number> = {};
    for (const a of client.attempts) answers[a.status || 'network error'] = (answers[a.status || 'network error'] ?? 0) + 1;
    log(`${label}: runs ${JSON.stringify(outcomes)}, submit answers ${JSON.stringify(answers)}`);
    log(`${label}: ${client.attempts.length} submit attempts, ${followers.length} followers (${followers.reduce((n, f) => n + f.record.resumes, 0)} resumes), ${cluster.fleet.spawned} worker processes`);
    return verdict;
  } finally {
    followers.forEach((f) => f.stop());
    tamper?.disconnect();
    await cluster.stop();
    for (const s of o.scenarios) s.cleanup?.();
  }
}
