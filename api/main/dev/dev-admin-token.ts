import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/**
 * The admin token `npm run dev` uses when ADMIN_TOKEN is unset, so the queue board (Bull Board)
 * and the operator API are on in development. Kept under DATA_DIR (0600) so a restart prints
 * the same token and a logged-in browser stays logged in. Never used by `serve`.
 */
export function devAdminToken(dataDir: string): { token: string; file: string } {
  const file = path.resolve(dataDir, 'dev-admin-token');
  try {
    const token = readFileSync(file, 'utf8').trim();
    // ADMIN_TOKEN's own rule (config.ts): at least 16 characters; anything else is remade.
    if (/^[A-Za-z0-9_-]{16,}$/.test(token)) return { token, file };
  } catch {
    // Not made yet.
  }
  const token = `dev_${randomBytes(18).toString('base64url')}`;
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, `${token}\n`, { mode: 0o600 });
  return { token, file };
}
