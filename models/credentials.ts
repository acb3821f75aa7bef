import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * Bearer secrets (account API keys and worker tokens). A secret reads
 * `<scheme>_<lookup id: 16 chars><secret: 32 chars>`: the lookup id finds the record, the
 * sha256 of the whole string is compared in constant time. Only the hash is stored.
 */
export type SecretScheme = 'sy' | 'swt';

const LOOKUP_LEN = 16;
const SECRET_LEN = 32;
const LOOKUP_ALPHABET = 'abcdefghijklmnopqrstuvwxyz234567';
const SECRET_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

function randomString(alphabet: string, length: number): string {
  // Rejection sampling keeps every character uniformly likely.
  const limit = 256 - (256 % alphabet.length);
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < limit && out.length < length) out += alphabet[byte % alphabet.length];
    }
  }
  return out;
}

export interface MintedSecret {
  secret: string;
  lookupId: string;
  /** Shown in listings so people can tell their keys apart. */
  prefix: string;
  hash: string;
}

export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}

export function mintSecret(scheme: SecretScheme): MintedSecret {
  const lookupId = randomString(LOOKUP_ALPHABET, LOOKUP_LEN);
  const secret = `${scheme}_${lookupId}${randomString(SECRET_ALPHABET, SECRET_LEN)}`;
  return { secret, lookupId, prefix: secret.slice(0, scheme.length + 1 + 8), hash: hashSecret(secret) };
}

const patterns: Record<SecretScheme, RegExp> = {
  sy: new RegExp(`^sy_([${LOOKUP_ALPHABET}]{${LOOKUP_LEN}})[A-Za-z0-9]{${SECRET_LEN}}$`),
  swt: new RegExp(`^swt_([${LOOKUP_ALPHABET}]{${LOOKUP_LEN}})[A-Za-z0-9]{${SECRET_LEN}}$`),
};

/** The lookup id of a well-formed secret, or null (malformed secrets never reach the store). */
export function lookupIdOf(scheme: SecretScheme, secret: string): string | null {
  return patterns[scheme].exec(secret)?.[1] ?? null;
}

/** Constant-time comparison of two hex digests. */
export function sameHash(a: string, b: string): boolean {
  const x = Buffer.from(a, 'hex');
  const y = Buffer.from(b, 'hex');
  return x.length === y.length && x.length > 0 && timingSafeEqual(x, y);
}
