import { UnauthorizedError } from '../../../models/errors.js';

/** `Bearer <token>` (RFC 6750 §2.1): the token is visible ASCII; spaces or tabs may pad it. */
const BEARER = /^Bearer[ \t]+([\x21-\x7e]+)[ \t]*$/i;

/** The token of an `Authorization` header of the Bearer scheme; null when absent or of another scheme. */
export function bearerToken(authorization: string | undefined): string | null {
  return BEARER.exec(authorization ?? '')?.[1] ?? null;
}

/**
 * The account key a request presents, from `Authorization: Bearer` or `X-Service-Key`; null when
 * it presents none. An Authorization header that is not a bearer, or two X-Service-Key headers,
 * are refused rather than ignored: the caller meant to authenticate.
 */
export function presentedKey(headers: { authorization?: string; 'x-service-key'?: string | string[] }): string | null {
  const auth = headers.authorization;
  if (auth) {
    const token = bearerToken(auth);
    if (!token) throw new UnauthorizedError('the Authorization header must read "Bearer <API key>"');
    return token;
  }
  const key = headers['x-service-key'];
  if (Array.isArray(key)) throw new UnauthorizedError('send one X-Service-Key header');
  return key ? key.trim() : null;
}
