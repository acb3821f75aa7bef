import type { Tier } from '../models/kinds.js';
import type { WorkerModels } from '../sdk/protocol/index.js';

/** A connected worker as its gateway instance registered it. */
export interface WorkerInfo {
  worker_id: string;
  kinds: string[];
  tier: Tier;
  slots: number;
  busy: number;
  gateway_id: string;
  owner: { type: 'operator' | 'account'; id: string };
  hardware: Record<string, unknown>;
  software: Record<string, unknown>;
  /** Protocol 3: the models it serves, by kind (docs/models.md); empty: its kinds' default models only. */
  models: WorkerModels;
  connected_at: string;
  /** Private workers: when their current attestation evidence expires (null: none valid). */
  attested_until?: string | null;
  /** Private workers: the tier they serve while their evidence has lapsed (their token's trust). */
  fallback_tier?: Tier;
  /** Protocol 5: its backend does not answer (its `backend` frame): connected, but offered no lease. */
  backend_down?: { message: string; since: string };
}

/**
 * The tier a worker counts under right now: a private worker whose evidence has lapsed takes
 * no private work until it attests again, so it is not counted as private meanwhile.
 */
export function effectiveTier(w: WorkerInfo, now = Date.now()): Tier {
  if (w.tier !== 'private') return w.tier;
  return w.attested_until && Date.parse(w.attested_until) > now ? 'private' : (w.fallback_tier ?? 'open');
}
