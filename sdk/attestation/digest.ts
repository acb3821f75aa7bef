/**
 * Hashing and canonical JSON shared by the gateway, workers and clients, on WebCrypto so the
 * same code runs in Node 20 and browsers.
 */

/** JSON with object keys sorted at every level: the bytes a receipt's input hash covers. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const keys = Object.keys(value as Record<string, unknown>)
    .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
    .sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`).join(',')}}`;
}

const hex = (bytes: ArrayBuffer) => Array.from(new Uint8Array(bytes), (b) => b.toString(16).padStart(2, '0')).join('');

/** Lower-case hex sha256 of text (UTF-8) or bytes. */
export async function sha256Hex(data: string | Uint8Array): Promise<string> {
  const bytes = typeof data === 'string' ? new TextEncoder().encode(data) : data;
  return hex(await globalThis.crypto.subtle.digest('SHA-256', bytes as Uint8Array<ArrayBuffer>));
}

/**
 * The input a receipt's hash covers: the input as leased, with each of its files' fields
 * replaced by `sha256:<hex>` of the file's bytes. A file is signed for by what it holds, not
 * by the reference that named it, so a caller can check a receipt against the bytes they sent
 * whatever form they sent them in (docs/confidentiality.md, "Receipts").
 */
export function receiptInput(input: unknown, files: Record<string, string> = {}): unknown {
  if (Object.keys(files).length === 0 || input === null || typeof input !== 'object' || Array.isArray(input)) return input;
  const out: Record<string, unknown> = { ...(input as Record<string, unknown>) };
  for (const [field, sha256] of Object.entries(files)) out[field] = `sha256:${sha256}`;
  return out;
}

/**
 * The hash a receipt carries for a run's input: sha256 of the canonical JSON of
 * {@link receiptInput}, given the sha256 of each input file by field.
 */
export function inputDigest(input: unknown, files?: Record<string, string>): Promise<string> {
  return sha256Hex(canonicalJson(receiptInput(input, files)));
}
