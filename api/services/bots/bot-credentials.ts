import type { IncomingHttpHeaders } from 'node:http';
import { UnauthorizedError } from '../../../models/errors.js';
import { presentedKey } from '../auth/bearer.js';

/** What a bot surface was given: a bot token (embed or session) or the owner's account key, and the Origin. */
export interface BotCredentials {
  token?: string;
  accountKey?: string;
  origin?: string;
}

export const EMBED_TOKEN_PREFIX = 'sybot_';
export const SESSION_TOKEN_PREFIX = 'sybs_';

const isBotToken = (s: string) => s.startsWith(EMBED_TOKEN_PREFIX) || s.startsWith(SESSION_TOKEN_PREFIX);

/**
 * Reads a bot surface's credentials: `Authorization: Bearer` (or `X-Service-Key`) holds a bot
 * token or an account key, told apart by prefix; `?token=` holds a bot token. A header wins over
 * the query. Throws 401 for a malformed Authorization header or a repeated `token`.
 */
export function botCredentials(headers: IncomingHttpHeaders, queryToken: string | string[] | null | undefined): BotCredentials {
  if (Array.isArray(queryToken)) throw new UnauthorizedError('send one `token` query parameter');
  const presented = presentedKey(headers);
  const origin = typeof headers.origin === 'string' ? headers.origin : undefined;
  if (presented && !isBotToken(presented)) return { accountKey: presented, origin };
  const token = presented ?? (queryToken || undefined);
  return { token, origin };
}
