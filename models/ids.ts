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

/** `run_` followed by a ULID: sortable by creation time, so lists page by id. */
export const newRunId = (): string => `run_${ulid()}`;
export const newAccountId = (): string => `acct_${ulid()}`;
export const newOperatorId = (): string => `op_${ulid()}`;
/** `file_` and a ULID: an account's files list newest first by id. */
export const newFileId = (): string => `file_${ulid()}`;

/** `batch_` and a ULID (docs/jobs.md, "Batches"). */
export const newBatchId = (): string => `batch_${ulid()}`;
export const BATCH_ID_PATTERN = /^batch_[0-9A-HJKMNP-TV-Z]{26}$/;

export const FILE_ID_PATTERN = /^file_[0-9A-HJKMNP-TV-Z]{26}$/;

export const RUN_ID_PATTERN = /^run_[0-9A-HJKMNP-TV-Z]{26}$/;

/** The smallest run id that a run created at `ms` can have; ids below it are older. */
export function runIdFloor(ms: number): string {
  const alphabet = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
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
