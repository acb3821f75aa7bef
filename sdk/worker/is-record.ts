/** A JSON object (not null, not an array): what every frame and handler result must be before its fields are read. */
export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
