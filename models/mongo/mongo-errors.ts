import { MongoServerError } from 'mongodb';

/** E11000: an insert (or upsert) hit a unique index, i.e. the record exists already. */
export function isDuplicateKey(err: unknown): boolean {
  return err instanceof MongoServerError && err.code === 11000;
}
