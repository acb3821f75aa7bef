import type { Logger } from 'pino';
import { Gauge, type Registry } from 'prom-client';
import { rankCounts, workersServing, type FleetCounters } from '../../../dispatch/fleet-counters.js';
import { missingRanks } from '../../../dispatch/rank-placement.js';
import type { ModelStore } from '../../../models/stores.js';
import { DEFAULT_MIDDLE_RANKS } from '../../../models/types.js';
import type { WorkerInfo } from '../../../dispatch/worker-info.js';
import type { JobQueues } from '../../../queues/job-queues.js';
import { KIND_NAMES, TIERS } from '../../../models/kinds.js';
import { QUEUE_STATES, SLOT_STATES, SOCKET_SURFACES, kindLabel, type SocketSurface } from './metric-labels.js';
import { QueueDepth } from './queue-depth.js';

/** Where the live gauges read their values, at scrape time. */
export interface LiveSources {
  /** For `switchyard_queue_jobs` (fleet-wide, from Redis). */
  queues: JobQueues;
  /** The fleet of every instance, for the jobs of a model that no live worker can take. */
  fleet?: Pick<FleetCounters, 'read'>;
  /** A ranked model's rank count and placement policy: its jobs wait while any rank has no worker. */
  catalogue?: Pick<ModelStore, 'get'>;
  /** The workers connected to this process. */
  localWorkers: () => readonly WorkerInfo[];
  /** Open SSE streams of this process. */
  sseConnections: () => number;
  /** Open WebSockets of this process, by surface. */
  socketConnections: () => Record<SocketSurface, number>;
  log: Logger;
  /** @defaultValue 1000 */
  queueCacheMs?: number;
}

/**
 * Gauges of live state, set when Prometheus scrapes from what exists at that moment (nothing
 * to keep in step as workers and clients come and go). Series of fixed label sets are set to
 * 0 first, so a gauge falls to 0 instead of vanishing when the last worker leaves.
 */
export function registerLiveGauges(registers: Registry[], src: LiveSources): void {
  /** A gauge emptied and filled again at each scrape. */
  const live = <L extends string>(name: string, help: string, labelNames: readonly L[], fill: (g: Gauge<L>) => void | Promise<void>) => {
    const gauge: Gauge<L> = new Gauge<L>({
      name,
      help,
      labelNames,
      registers,
      collect: () => {
        gauge.reset();
        return fill(gauge);
      },
    });
  };
  const depth = new QueueDepth({ queues: src.queues, cacheMs: src.queueCacheMs });

  /** The queue counts, or null when Redis does not answer: the rest of the scrape is still worth having. */
  const rows = async () => {
    try {
      return await depth.read();
    } catch (err) {
      src.log.warn({ err }, 'metrics: could not read the queue counts');
      return null;
    }
  };

  // A kind's jobs summed over its default queue and its model queues: the series an operator
  // had before routing by model, and still the one to alert on for a kind.
  live('switchyard_queue_jobs', 'Jobs in the queues of every instance, by state (read from Redis, cached 1 s)', ['kind', 'tier', 'state'], async (g) => {
    for (const row of (await rows()) ?? []) for (const state of QUEUE_STATES) g.inc({ kind: row.kind, tier: row.tier, state }, row[state]);
  });

  // One series per model of the catalogue that has had a job: bounded by the models operators
  // declare and workers advertise, never by what callers submit (unknown models are refused).
  live('switchyard_model_jobs', 'Jobs naming a model, queued or running, in every tier (read from Redis, cached 1 s)', ['kind', 'model', 'state'], async (g) => {
    for (const row of (await rows()) ?? []) {
      if (row.model === null) continue;
      g.inc({ kind: row.kind, model: row.model, state: 'queued' }, row.waiting + row.prioritized + row.delayed);
      g.inc({ kind: row.kind, model: row.model, state: 'running' }, row.active);
    }
  });

  live('switchyard_model_jobs_without_worker', 'Queued jobs of a model that no live worker of their tier (or a stronger one) serves', ['kind', 'model'], async (g) => {
    const [depths, fleet] = await Promise.all([rows(), src.fleet?.read().catch((err: unknown) => src.log.warn({ err }, 'metrics: could not read the fleet'))]);
    if (!depths || !fleet) return;
    for (const row of depths) {
      if (row.model === null) continue;
      const served = fleet.kinds[row.kind]?.models[row.model];
      let none = !served || workersServing(served.by_tier, row.tier) === 0;
      // A ranked model's job needs a worker on every rank its tier may use (docs/ranks.md, "Waiting for a pipeline").
      const entry = served?.ranks ? await src.catalogue?.get(row.kind, row.model).catch(() => null) : null;
      if (entry?.ranks) none = missingRanks(row.tier, entry.ranks, entry.middle_ranks ?? DEFAULT_MIDDLE_RANKS, rankCounts(served, entry.ranks).map((r) => r.takes)).length > 0;
      g.inc({ kind: row.kind, model: row.model }, none ? row.waiting + row.prioritized + row.delayed : 0);
    }
  });

  live('switchyard_workers_connected', 'Workers connected to this instance, counted under each kind they serve', ['kind', 'tier'], (g) => {
    for (const kind of KIND_NAMES) for (const tier of TIERS) g.set({ kind, tier }, 0);
    for (const w of src.localWorkers()) for (const kind of w.kinds) g.inc({ kind: kindLabel(kind), tier: w.tier });
  });

  live('switchyard_worker_slots', 'Slots of the workers connected to this instance: busy, free, or idle on a worker whose backend is down (unavailable)', ['tier', 'state'], (g) => {
    for (const tier of TIERS) for (const state of SLOT_STATES) g.set({ tier, state }, 0);
    for (const w of src.localWorkers()) {
      const busy = Math.min(w.busy, w.slots);
      g.inc({ tier: w.tier, state: 'busy' }, busy);
      g.inc({ tier: w.tier, state: w.backend_down ? 'unavailable' : 'free' }, w.slots - busy);
    }
  });

  live('switchyard_sse_connections', 'Open SSE streams on this instance', [], (g) => g.set(src.sseConnections()));

  live('switchyard_websocket_connections', 'Open WebSockets on this instance, by surface', ['surface'], (g) => {
    const open = src.socketConnections();
    for (const surface of SOCKET_SURFACES) g.set({ surface }, open[surface]);
  });
}
