import { randomBytes, randomFillSync } from 'node:crypto';
import { monotonicFactory } from 'ulid';

/**
 * The same bytes / 256 as ulid's default generator, from a pool refilled 4 KiB at a time: the
 * default makes one crypto call (and one buffer) per character, 16 per id, which showed in
 * the submit benchmark's profile.
 */
const pool = new Uint8Array(4096);
let next = pool.length;
function pooledRandom(): number {
  if (next === pool.length) {
    randomFillSync(pool);
    next = 0;
  }
  return pool[next++] / 256;
}

const ulid = monotonicFactory(pooledRandom);

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

/**
 * The account group of an account (docs/architecture.md, "Redis Cluster"): two Crockford base32
 * characters (1,024 groups) from a 32-bit FNV-1a hash of its id. On a Redis Cluster an account's
 * keys and its runs' and batches' keys share the group's hash tag, so a run's create and settle
 * stay one script while accounts spread over the primaries.
 */
export function accountGroup(accountId: string): string {
  const h = fnv1a(accountId);
  return CROCKFORD[h & 31]! + CROCKFORD[(h >>> 5) & 31]!;
}

/** The 32-bit FNV-1a hash of a text's UTF-16 code units: cheap, and spreads ids evenly. */
export function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/** Every account group, for what must visit them all (the enqueue reconciler's outboxes). */
export const ACCOUNT_GROUPS: readonly string[] = [...CROCKFORD].flatMap((a) => [...CROCKFORD].map((b) => a + b));

/**
 * A ULID whose two characters after the time are the account's group, so the group can be read
 * back from the id alone (`groupOfId`). Still 26 Crockford base32 characters in time order (the
 * monotonic low part follows on), so an account's ids sort by creation.
 */
const groupedUlid = (accountId: string): string => {
  const id = ulid();
  return `${id.slice(0, 10)}${accountGroup(accountId)}${id.slice(12)}`;
};

/** The account group a run or batch id carries (`run_` / `batch_` then a grouped ULID). */
export const groupOfId = (id: string): string => {
  const ulidStart = id.indexOf('_') + 1;
  return id.slice(ulidStart + 10, ulidStart + 12);
};

/** `run_` followed by a ULID carrying the account's group: sortable by creation time, so lists page by id. */
export const newRunId = (accountId: string): string => `run_${groupedUlid(accountId)}`;
export const newAccountId = (): string => `acct_${ulid()}`;
export const newOperatorId = (): string => `op_${ulid()}`;
/** `file_` and a ULID: an account's files list newest first by id. */
export const newFileId = (): string => `file_${ulid()}`;

/** `batch_` and a ULID carrying the account's group (docs/jobs.md, "Batches"). */
export const newBatchId = (accountId: string): string => `batch_${groupedUlid(accountId)}`;
export const BATCH_ID_PATTERN = /^batch_[0-9A-HJKMNP-TV-Z]{26}$/;

export const FILE_ID_PATTERN = /^file_[0-9A-HJKMNP-TV-Z]{26}$/;

export const RUN_ID_PATTERN = /^run_[0-9A-HJKMNP-TV-Z]{26}$/;

/** The smallest run id that a run created at `ms` can have; ids below it are older. */
export function runIdFloor(ms: number): string {
  const alphabet = CROCKFORD;
  let t = Math.max(0, Math.floor(ms));
  let time = '';
  for (let i = 0; i < 10; i++) {
    time = alphabet[t % 32] + time;
    t = Math.floor(t / 32);
  }
  return `run_${time}${'0'.repeat(16)}`;
}

const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567';

/** 32 characters of lowercase base32 from 160 random bits: unguessable, and safe on case-insensitive disks. */
export function newArtifactId(): string {
  const bytes = randomBytes(20);
  let out = '';
  let bits = 0;
  let value = 0;
  for (const byte of bytes) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += BASE32[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
    value &= (1 << bits) - 1;
  }
  return out;
}
