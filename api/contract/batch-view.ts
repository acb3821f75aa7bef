import type { BatchSummary } from '../../models/batch-types.js';

/** The batch object of docs/api.md "Batches": its size, what it reserved, and its runs by status. */
export function batchView({ batch, counts, terminal }: BatchSummary) {
  return {
    batch_id: batch.batch_id,
    created_at: batch.created_at,
    size: batch.run_ids.length,
    price: batch.price,
    counts,
    terminal,
  };
}
