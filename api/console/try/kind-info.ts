import type { Capacity, KindCapability, TierCounts } from '../../../sdk/client/index.js';

/**
 * What GET /v1/capabilities and GET /v1/network/capacity say of a kind, beyond the client
 * library's types (docs/api.md, "Capabilities and capacity"): its price and its models.
 */

/** A JSON Schema of one input field, as far as the form reads it. */
export interface FieldSchema {
  type?: string | string[];
  description?: string;
  enum?: unknown[];
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  minLength?: number;
  maxLength?: number;
  default?: unknown;
  'x-switchyard-file'?: { accept: string[] };
}

export interface ObjectSchema {
  properties?: Record<string, FieldSchema>;
  required?: string[];
}

export interface KindModel {
  id: string;
  description: string | null;
  workers: number;
  workers_by_tier: TierCounts;
  input_schema: ObjectSchema | null;
}

export interface KindPrice {
  base: number;
  max?: number;
  [rate: string]: number | undefined;
}

export interface KindInfo extends KindCapability {
  price?: KindPrice;
  models?: KindModel[];
}

export type KindLoad = Capacity['by_kind'][number] & { models?: Array<{ id: string; workers: number; queued: number }> };

/** The schema keyword that marks a file field (models/kinds.ts FILE_KEYWORD). */
export const FILE_KEYWORD = 'x-switchyard-file';

/** A kind waits for workers while none is connected (its jobs queue with `no_worker_for_kind`). */
export const isWaiting = (k: Pick<KindCapability, 'workers'>): boolean => k.workers === 0;

/** "4 credits", or "1–500 credits" for a per-unit price. */
export function formatPrice(price: KindPrice | undefined): string {
  if (!price) return '—';
  const max = price.max ?? price.base;
  return max === price.base ? `${price.base} credit${price.base === 1 ? '' : 's'}` : `${price.base}–${max} credits`;
}

/** The input schema of a kind with the chosen model's (which extends it: docs/models.md) laid over. */
export function inputSchema(kind: KindInfo, modelId: string | undefined): { properties: Record<string, FieldSchema>; required: string[] } {
  const own = kind.input_schema as ObjectSchema;
  const model = modelId ? kind.models?.find((m) => m.id === modelId)?.input_schema : null;
  // A model narrows the kind's fields (a lower maximum) and adds its own: merged field by field.
  const properties: Record<string, FieldSchema> = { ...(own.properties ?? {}) };
  for (const [name, s] of Object.entries(model?.properties ?? {})) properties[name] = { ...properties[name], ...s };
  return {
    properties,
    required: [...new Set([...(own.required ?? []), ...(model?.required ?? [])])],
  };
}

/** The first JSON type of a field (`["string","null"]` reads as string). */
export function fieldType(s: FieldSchema): string {
  const t = Array.isArray(s.type) ? s.type.find((x) => x !== 'null') : s.type;
  if (t) return t;
  if (s.enum) return typeof s.enum[0] === 'number' ? 'number' : 'string';
  return 'string';
}
