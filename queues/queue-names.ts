import type { Tier } from '../models/kinds.js';

/**
 * BullMQ queue names cannot contain ':' (it separates Redis key parts), and kinds are full of
 * them, so `inference:image:generate` in tier open becomes `inference.image.generate.open`.
 */
export function queueName(kind: string, tier: Tier): string {
  return `${kind.replaceAll(':', '.')}.${tier}`;
}

/** The tier of a queue named by `queueName`. */
export const queueTier = (queue: string): Tier => queue.slice(queue.lastIndexOf('.') + 1) as Tier;
