import { createHmac, randomBytes } from 'node:crypto';
import type { WebhookSecret } from '../../../models/types.js';

const SECRET_PREFIX = 'whsec_';

/** A new signing secret: `whsec_` and the base64 of 24 random bytes, as Standard Webhooks libraries expect. */
export function mintWebhookSecret(): WebhookSecret {
  return { secret: `${SECRET_PREFIX}${randomBytes(24).toString('base64')}`, created_at: new Date().toISOString() };
}

/**
 * The `webhook-signature` header of Standard Webhooks: `v1,` and the base64 HMAC-SHA256, keyed
 * with the secret's bytes (the base64 after `whsec_`), of `${id}.${timestamp}.${body}`.
 */
export function signWebhook(secret: string, id: string, timestamp: number, body: string): string {
  const key = Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64');
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}
