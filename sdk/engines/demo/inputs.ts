/** Lenient readers for input fields: the gateway validated the schema, the demo only needs sane values. */

export function str(input: Record<string, unknown>, key: string, fallback = ''): string {
  const v = input[key];
  return typeof v === 'string' ? v : fallback;
}

/** A number clamped to [min, max]; the fallback when absent or not a finite number. */
export function num(input: Record<string, unknown>, key: string, fallback: number, min: number, max: number): number {
  const v = input[key];
  const n = typeof v === 'number' && Number.isFinite(v) ? v : fallback;
  return Math.min(max, Math.max(min, n));
}

export function int(input: Record<string, unknown>, key: string, fallback: number, min: number, max: number): number {
  return Math.round(num(input, key, fallback, min, max));
}
