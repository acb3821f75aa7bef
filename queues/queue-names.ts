import { TIERS, type Tier } from '../models/kinds.js';
import { fnv1a } from '../models/ids.js';
import { parsePartition, partitionName } from '../models/redis/queue-partitions.js';

/**
 * BullMQ queue names cannot contain ':' (it separates Redis key parts), and kinds are full of
 * them, so `inference:image:generate` in tier open becomes `inference.image.generate.open`.
 * A job naming a model goes to its own queue beside the kind's (docs/models.md, "Routing"):
 * `inference.image.generate.open~sdxl`, the model id percent-encoded (ids may hold `:` and `/`).
 */
export const MODEL_SEPARATOR = '~';

export function queueName(kind: string, tier: Tier, model?: string | null): string {
  const base = `${kind.replaceAll(':', '.')}.${tier}`;
  return model ? `${base}${MODEL_SEPARATOR}${encodeURIComponent(model)}` : base;
}

export interface QueueAddress {
  kind: string;
  tier: Tier;
  /** Null for a kind's default queue (jobs naming no model). */
  model: string | null;
}

/**
 * The kind, tier and model of a queue named by `queueName`, or of one of its partitions
 * (`partitionNames`); null for a name neither can have made.
 */
export function parseQueueName(name: string): QueueAddress | null {
  const queue = parsePartition(name)?.queue;
  if (queue === undefined) return null;
  const sep = queue.indexOf(MODEL_SEPARATOR);
  const base = sep < 0 ? queue : queue.slice(0, sep);
  const dot = base.lastIndexOf('.');
  const tier = base.slice(dot + 1) as Tier;
  if (dot <= 0 || !TIERS.includes(tier)) return null;
  let model: string | null = null;
  if (sep >= 0) {
    try {
      model = decodeURIComponent(queue.slice(sep + 1));
    } catch {
      return null;
    }
    if (!model) return null;
  }
  return { kind: base.slice(0, dot).replaceAll('.', ':'), tier, model };
}

/** The tier of a queue named by `queueName`. */
export const queueTier = (queue: string): Tier => parseQueueName(queue)?.tier ?? 'open';

/** The model a job is routed by: its input's `model`, when it names one. */
export function routedModel(input: Record<string, unknown> | null | undefined): string | null {
  const model = input?.model;
  return typeof model === 'string' && model !== '' ? model : null;
}

/**
 * The queue a run waits in: its kind's, tier's and model's, and when that queue is split in
 * `partitions` (QUEUE_PARTITIONS; docs/architecture.md, "Queue partitions"), the partition its
 * id hashes to, so a run is always in the one partition every gateway finds it in.
 */
export function runQueueName(run: { run_id: string; kind: string; confidentiality: Tier; input: Record<string, unknown> }, partitions = 1): string {
  const queue = queueName(run.kind, run.confidentiality, routedModel(run.input));
  return partitions > 1 ? partitionName(queue, fnv1a(run.run_id) % partitions, partitions) : queue;
}

/**
 * Every partition of a queue that any of these partition counts can have put a job in (the
 * plain name for a count of 1), each once: what a dispatcher drains, in this order, in turn.
 */
export function partitionNames(queue: string, counts: readonly number[]): string[] {
  const names = new Set<string>();
  for (const count of counts) for (let k = 0; k < count; k++) names.add(partitionName(queue, k, count));
  return [...names];
}

/** The queue a partition was split from (a plain queue's name is its own). */
export const unpartitioned = (name: string): string => parsePartition(name)?.queue ?? name;

/** The kind and model of a model queue or partition, whatever its tier (`inference.llm.text-generate~m`); null for a default queue. */
export function modelQueueKey(name: string): string | null {
  const queue = unpartitioned(name);
  const sep = queue.indexOf(MODEL_SEPARATOR);
  if (sep < 0) return null;
  const base = queue.slice(0, sep);
  return `${base.slice(0, base.lastIndexOf('.'))}${queue.slice(sep)}`;
}
