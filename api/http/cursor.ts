import { ApiError } from '../../models/errors.js';

/**
 * The opaque `cursor` of a list: the last id of a page, base64url so callers do not build their
 * own. `decode` accepts only what `encode` could have made for ids of `idPattern`.
 */
export function listCursor(idPattern: RegExp) {
  return {
    encode: (id: string): string => Buffer.from(id).toString('base64url'),
    decode(cursor: string): string {
      const id = Buffer.from(cursor, 'base64url').toString('utf8');
      if (!idPattern.test(id)) throw new ApiError('invalid_request', 'cursor is not one this API returned');
      return id;
    },
  };
}
