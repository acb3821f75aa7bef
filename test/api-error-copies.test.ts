import assert from 'node:assert/strict';
import { ApiError, NotFoundError, toApiError } from '../models/errors.js';

/**
 * The tests load the sources as CommonJS (tsx's require hook), while the gateway imports the S3
 * store lazily with `import()`, as ES modules: that store and what it imports, models/errors.ts
 * included, are a second copy. An ApiError of that copy must still be an ApiError here, or its
 * status is lost (a 413 answered as a 400 "the upload was interrupted", found by the cluster
 * pass's S3 storage).
 */
describe('ApiError across copies of models/errors.ts', () => {
  it("an ApiError of the lazily imported copy is an ApiError, and keeps its code and status", async () => {
    const other = (await import('../models/errors.js?copy' as string)) as typeof import('../models/errors.js');
    const foreign = new other.ApiError('payload_too_large', 'an artifact may be at most 16 bytes', { details: { max_bytes: 16 } });
    assert.ok(foreign instanceof ApiError);
    assert.equal(toApiError(foreign), foreign);
    assert.equal(toApiError(foreign).status, 413);
  });

  it('a plain Error, or an object that only looks like one, is not an ApiError; subclasses check the prototype', () => {
    assert.ok(!(new Error('x') instanceof ApiError));
    assert.ok(!(Object.assign(new Error('x'), { name: 'ApiError', code: 'not_found', status: 404 }) instanceof ApiError));
    assert.ok(new NotFoundError('run') instanceof ApiError);
    assert.ok(!(new ApiError('not_found', 'x') instanceof NotFoundError));
  });
});
