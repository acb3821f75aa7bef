import { setTimeout as sleep } from 'node:timers/promises';
import type { CogClient } from './client.js';

/**
 * Waits for the server's `GET /health-check` to say READY (or BUSY: ready, its slots in use),
 * as a container runs its model's setup() for minutes before it can predict. STARTING, and a
 * server that does not answer yet (the container still booting), are waited out up to
 * `timeoutMs`; SETUP_FAILED and DEFUNCT will not get better and fail at once, with setup's logs.
 */
export async function waitUntilReady(client: CogClient, timeoutMs: number, intervalMs = 500): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = 'no answer';
  for (;;) {
    try {
      const health = await client.health();
      if (health.status === 'READY' || health.status === 'BUSY') return;
      if (health.status === 'SETUP_FAILED' || health.status === 'DEFUNCT') {
        const logs = health.setupLogs?.trim().split('\n').slice(-20).join('\n');
        throw Object.assign(new Error(`the Cog server at ${client.base} is ${health.status}${logs ? `; the end of its setup logs:\n${logs}` : ''}`), { final: true });
      }
      last = `status ${health.status}${health.userHealthcheckError ? ` (${health.userHealthcheckError})` : ''}`;
    } catch (err) {
      if ((err as { final?: boolean }).final) throw err;
      last = (err as Error).message;
    }
    if (Date.now() >= deadline) throw new Error(`the Cog server at ${client.base} was not READY within ${Math.round(timeoutMs / 1000)} s (last: ${last})`);
    await sleep(Math.min(intervalMs, Math.max(0, deadline - Date.now())));
  }
}
