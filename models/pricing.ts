/**
 * Usage-based prices (PRICES, docs/jobs.md "Cost"). A kind's price is either a fixed number of
 * credits or a `UnitRate`: a base plus whole credits per unit of what a job uses. Submission
 * reserves the most the job can cost (`reservation`: from its input's bounds, or the kind's
 * maximum); the terminal transition charges what the worker reported it used (`unitCost`),
 * never more than the reservation. The same arithmetic runs in Lua (models/redis/scripts/
 * includes/unit-cost.ts): whole numbers only, so the two cannot round apart.
 */

/** The units a worker reports in its `complete` frame (docs/worker-protocol.md); each optional. */
export interface Usage {
  input_tokens?: number;
  output_tokens?: number;
  /** Seconds of output (audio, video); charged per started second. */
  seconds?: number;
  images?: number;
}

/** A per-unit price. Every rate and bound is a whole number >= 0; absent rates are 0. */
export interface UnitRate {
  /** Charged for every succeeded job, whatever it used. */
  base: number;
  per_1k_input_tokens?: number;
  per_1k_output_tokens?: number;
  per_second?: number;
  per_image?: number;
  /** The most units a job of the kind is charged for (and reserved, when its input gives no bound). */
  max_input_tokens?: number;
  max_output_tokens?: number;
  max_seconds?: number;
  max_images?: number;
  /** The most a job of the kind costs, whatever it used. */
  max?: number;
}

export type KindPrice = number | UnitRate;

const UNITS = [
  { rate: 'per_1k_input_tokens', bound: 'max_input_tokens', usage: 'input_tokens' },
  { rate: 'per_1k_output_tokens', bound: 'max_output_tokens', usage: 'output_tokens' },
  { rate: 'per_second', bound: 'max_seconds', usage: 'seconds' },
  { rate: 'per_image', bound: 'max_images', usage: 'images' },
] as const;

export const UNIT_RATE_FIELDS: readonly string[] = ['base', 'max', ...UNITS.flatMap((u) => [u.rate, u.bound])];
export const USAGE_FIELDS: readonly string[] = UNITS.map((u) => u.usage);

/** What is wrong with a PRICES entry, or null: a whole number, or a UnitRate whose every rated unit has a bound (or `max` caps it). */
export function priceProblem(value: unknown): string | null {
  if (typeof value === 'number') return Number.isSafeInteger(value) && value >= 0 ? null : 'must be a whole number >= 0';
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return 'must be a whole number of credits or an object such as {"base": 1, "per_second": 3, "max_seconds": 120}';
  const rate = value as Record<string, unknown>;
  for (const [k, v] of Object.entries(rate)) {
    if (!UNIT_RATE_FIELDS.includes(k)) return `has an unknown field ${JSON.stringify(k)} (known: ${UNIT_RATE_FIELDS.join(', ')})`;
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) return `.${k} must be a whole number >= 0`;
  }
  const rated = UNITS.filter((u) => (rate[u.rate] as number | undefined) !== undefined);
  if (rated.length === 0) return 'names no per-unit rate (per_1k_input_tokens, per_1k_output_tokens, per_second, per_image): give a plain number for a fixed price';
  const unbounded = rated.filter((u) => rate[u.bound] === undefined);
  if (unbounded.length > 0 && rate.max === undefined) {
    return `needs "max" or ${unbounded.map((u) => `"${u.bound}"`).join(' and ')}: what a job whose input gives no bound reserves`;
  }
  return null;
}

/** Whole credits for `usage` at `rate`, capped at `rate.max`: base + ceil(tokens × per-1k / 1000) + started seconds × per_second + images × per_image. */
export function unitCost(rate: UnitRate, usage: Usage): number {
  const n = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v > 0 ? v : 0);
  const tokens = Math.floor(n(usage.input_tokens)) * (rate.per_1k_input_tokens ?? 0) + Math.floor(n(usage.output_tokens)) * (rate.per_1k_output_tokens ?? 0);
  const cost = rate.base + Math.ceil(tokens / 1000) + Math.ceil(n(usage.seconds)) * (rate.per_second ?? 0) + Math.floor(n(usage.images)) * (rate.per_image ?? 0);
  return rate.max === undefined ? cost : Math.min(cost, rate.max);
}

const utf8Bytes = (v: unknown): number => (v === undefined ? 0 : Buffer.byteLength(typeof v === 'string' ? v : JSON.stringify(v)));
const whole = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? Math.ceil(v) : undefined);

/**
 * The most of each unit a job's input lets it use; undefined where the input says nothing.
 * Input tokens: the UTF-8 bytes of its prompt, messages and tools (no tokenizer makes more
 * tokens than bytes, and the JSON's own punctuation covers a chat template's few). Output
 * tokens: `max_tokens` (or OpenAI's `max_completion_tokens`). Seconds: `duration_s`. Images: `n` or `num_images`, and one for
 * `inference:image:generate`, whose input names no count (it makes one image).
 */
export function inputBounds(kind: string, input: Record<string, unknown>): Usage {
  const text = input.prompt !== undefined || input.messages !== undefined;
  return {
    input_tokens: text ? utf8Bytes(input.prompt) + utf8Bytes(input.messages) + utf8Bytes(input.tools) : undefined,
    output_tokens: whole(input.max_tokens) ?? whole(input.max_completion_tokens),
    seconds: whole(input.duration_s),
    images: whole(input.n) ?? whole(input.num_images) ?? (kind === 'inference:image:generate' ? 1 : undefined),
  };
}

/**
 * What a submission reserves: a fixed price, or the cost of the input's bounds (each capped by
 * the kind's `max_<unit>`; a unit without either is the kind's `max`).
 */
export function reservation(kind: string, price: KindPrice, input: Record<string, unknown>): number {
  if (typeof price === 'number') return price;
  const bounds = inputBounds(kind, input);
  const most: Usage = {};
  for (const u of UNITS) {
    if (price[u.rate] === undefined) continue;
    const given = bounds[u.usage];
    const cap = price[u.bound];
    const bound = given === undefined ? cap : cap === undefined ? given : Math.min(given, cap);
    // priceProblem made sure that a unit without a bound has `max` to fall back on.
    if (bound === undefined) return price.max!;
    most[u.usage] = bound;
  }
  return unitCost(price, most);
}

/** The most a job of the kind can cost (what `GET /v1/capabilities` shows as `max`): with no bound from its input. */
export function kindMaximum(price: KindPrice): number {
  if (typeof price === 'number') return price;
  if (price.max !== undefined) return price.max;
  return unitCost(price, Object.fromEntries(UNITS.map((u) => [u.usage, price[u.bound] ?? 0])));
}

/** The UTC calendar month `YYYY-MM` of an instant: an account budget's period (a run's is its `created_at`'s). */
export const budgetPeriod = (ms: number): string => new Date(ms).toISOString().slice(0, 7);

/** A kind's price as /v1/capabilities shows it: `base` and `max` always (equal for a fixed price), and the rates. */
export function priceView(price: KindPrice): UnitRate & { max: number } {
  return typeof price === 'number' ? { base: price, max: price } : { ...price, max: kindMaximum(price) };
}
