import { sha256Hex } from '../attestation/index.js';

/** An input file as its submitter knows it: its bytes, or their sha256 in hex. */
export type InputFileProof = Blob | Uint8Array | ArrayBuffer | string;

const SHA256_HEX = /^[0-9a-f]{64}$/;

function isBinary(value: unknown): value is Blob | Uint8Array | ArrayBuffer {
  return value instanceof Uint8Array || value instanceof ArrayBuffer || (typeof Blob !== 'undefined' && value instanceof Blob);
}

async function hashBinary(value: Blob | Uint8Array | ArrayBuffer): Promise<string> {
  if (value instanceof Uint8Array) return sha256Hex(value);
  if (value instanceof ArrayBuffer) return sha256Hex(new Uint8Array(value));
  return sha256Hex(new Uint8Array(await value.arrayBuffer()));
}

/** RFC 2397 `data:[<type>][;base64],<data>` to its bytes, as the gateway decodes it. */
export function dataUriBytes(uri: string): Uint8Array {
  const comma = uri.indexOf(',');
  if (!/^data:/i.test(uri) || comma < 0) throw new TypeError('not a data: URI');
  const meta = uri.slice(5, comma).split(';');
  const data = uri.slice(comma + 1);
  if (meta[meta.length - 1].toLowerCase() === 'base64') {
    const text = atob(data.replace(/-/g, '+').replace(/_/g, '/'));
    return Uint8Array.from(text, (c) => c.charCodeAt(0));
  }
  const text = data.replace(/%([0-9a-f]{2})/gi, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
  return Uint8Array.from(text, (c) => c.charCodeAt(0));
}

/**
 * The sha256 of each file of a submitted input, by field, for checking a private run's receipt
 * (which signs each input file by its bytes, not by the reference that named it). The fields
 * are those the receipt signs, those whose value is bytes, and those `given` names; any other
 * field is hashed as the JSON it is, which covers a data: URI's bytes as well. A field's hash comes from `given` (its bytes or hex sha256), else from its value:
 * bytes and data: URIs are hashed here, http(s) URLs are downloaded with `get` and hashed. A
 * file id or `@path` cannot be hashed without its bytes: pass them in `given`.
 */
export async function submittedFileHashes(
  input: unknown,
  signedFields: string[],
  given: Record<string, InputFileProof> = {},
  get: typeof fetch = globalThis.fetch,
): Promise<Record<string, string>> {
  if (input === null || typeof input !== 'object' || Array.isArray(input)) return {};
  const values = input as Record<string, unknown>;
  const fields = new Set([
    ...signedFields.filter((f) => Object.hasOwn(values, f)),
    // Bytes cannot travel in JSON: such a field was a file, signed or not.
    ...Object.keys(values).filter((f) => isBinary(values[f])),
    ...Object.keys(given),
  ]);
  const out: Record<string, string> = {};
  for (const field of fields) out[field] = await hashOf(field, Object.hasOwn(given, field) ? given[field] : values[field], Object.hasOwn(given, field), get);
  return out;
}

async function hashOf(field: string, value: unknown, given: boolean, get: typeof fetch): Promise<string> {
  if (isBinary(value)) return hashBinary(value);
  if (typeof value !== 'string') throw new TypeError(`input.${field} is not a file: pass its bytes or sha256 as inputFiles.${field}`);
  if (given) {
    if (!SHA256_HEX.test(value)) throw new TypeError(`inputFiles.${field} must be the file's bytes or its sha256 as 64 lower-case hex digits`);
    return value;
  }
  if (/^data:/i.test(value)) return sha256Hex(dataUriBytes(value));
  if (/^https?:\/\//i.test(value)) {
    const res = await get(value);
    if (!res.ok) throw new TypeError(`could not download input.${field} (${value}) to hash it: HTTP ${res.status}; pass its bytes or sha256 as inputFiles.${field}`);
    return sha256Hex(new Uint8Array(await res.arrayBuffer()));
  }
  throw new TypeError(`input.${field} names a file by reference (${JSON.stringify(value.slice(0, 80))}): pass its bytes or sha256 as inputFiles.${field}`);
}
