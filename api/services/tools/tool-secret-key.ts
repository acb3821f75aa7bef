import { randomBytes } from 'node:crypto';
import { linkSync, mkdirSync, readFileSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { ToolStore } from '../../../models/stores.js';
import { ConfigError } from '../../main/config.js';
import { SecretBox } from './secret-box.js';

/** Plaintext and context of the key check. */
const KEY_CHECK = 'switchyard tool key check';

/** Where the gateway keeps the key it made itself, under DATA_DIR. */
export const TOOL_SECRET_KEY_FILE = 'tool-secret.key';
/** The name `npm run dev` used before `serve` made keys too; still read, then renamed. */
const LEGACY_DEV_FILE = 'dev-tool-secret.key';

export interface ToolSecretKey {
  key: Buffer;
  /** `environment`: TOOL_SECRET_KEY; `file`: read from `file`; `created`: made now and written to `file`. */
  origin: 'environment' | 'file' | 'created';
  file?: string;
}

function decode(text: string, file: string): Buffer {
  const trimmed = text.trim();
  const key = Buffer.from(trimmed, /^[0-9a-fA-F]{64}$/.test(trimmed) ? 'hex' : 'base64');
  if (key.length !== 32) throw new ConfigError([`${file} does not hold a 32-byte key (base64 or hex); restore it, or set TOOL_SECRET_KEY`]);
  return key;
}

function readKey(file: string): Buffer | undefined {
  try {
    return decode(readFileSync(file, 'utf8'), file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/**
 * The key that seals tool secrets: TOOL_SECRET_KEY when set; otherwise one the gateway made once
 * and keeps in DATA_DIR/tool-secret.key (mode 0600), so a bearer tool (docs/tools.md) works under a
 * plain `npm start` and its secrets survive restarts. Several gateway processes on one DATA_DIR
 * may start at once: the first to link its file wins and the others read its key.
 */
export function loadToolSecretKey(configured: Buffer | undefined, dataDir: string): ToolSecretKey {
  if (configured) return { key: configured, origin: 'environment' };
  const file = path.resolve(dataDir, TOOL_SECRET_KEY_FILE);
  const legacy = path.resolve(dataDir, LEGACY_DEV_FILE);
  for (;;) {
    const existing = readKey(file);
    if (existing) return { key: existing, origin: 'file', file };
    try {
      renameSync(legacy, file);
      continue; // an earlier `npm run dev` made one: keep it, tools it sealed still open
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    const key = randomBytes(32);
    mkdirSync(path.dirname(file), { recursive: true });
    // Written whole under a private name, then linked into place: link fails if the file exists,
    // so a reader never sees a half-written key and a second writer never replaces the first.
    const draft = `${file}.${process.pid}.${randomBytes(4).toString('hex')}`;
    writeFileSync(draft, `${key.toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
    try {
      linkSync(draft, file);
      return { key, origin: 'created', file };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      // Another process made it first: loop and read theirs.
    } finally {
      unlinkSync(draft);
    }
  }
}

/**
 * Checks at start that `key` opens the tool secrets the store already holds: the first gateway
 * on a store leaves a value sealed with its key (the key check), and a gateway with another key
 * refuses to start rather than fail every call of every tool with a secret later. A store with
 * tool secrets but no key check yet (they were sealed before there was one) is checked against
 * one of those secrets before its key check is claimed.
 *
 * @throws ConfigError naming TOOL_SECRET_KEY when the stored check, or that secret, does not open.
 */
export async function verifyToolSecretKey(store: Pick<ToolStore, 'claimKeyCheck' | 'keyCheck' | 'sampleSecret'>, key: ToolSecretKey): Promise<void> {
  const box = new SecretBox(key.key);
  const refuse = (err: unknown): never => {
    const from = key.origin === 'environment' ? 'TOOL_SECRET_KEY' : `${key.file} (TOOL_SECRET_KEY is not set)`;
    throw new ConfigError([
      `the tool secret key from ${from} does not open the tool secrets this store already holds (${(err as Error).message}). ` +
        'Start with the key they were sealed with (set TOOL_SECRET_KEY to it); every gateway instance on one store must share one key',
    ]);
  };
  let stored = await store.keyCheck();
  if (stored === null) {
    const sample = await store.sampleSecret();
    if (sample) {
      try {
        box.open(sample.sealed, `${sample.toolId}:${sample.role}`);
      } catch (err) {
        refuse(err);
      }
    }
    stored = await store.claimKeyCheck(box.seal(KEY_CHECK, KEY_CHECK));
  }
  try {
    box.open(stored, KEY_CHECK);
  } catch (err) {
    refuse(err);
  }
}
