const BATCH = 'batch_01JHB5D2E4F6G8H0J2K4M6N8P0';
const T0 = '2026-01-15T09:30:00.000Z';
const RUNS = ['run_01JHB5D2E4F6G8H0J2K4M6N8P1', 'run_01JHB5D2E4F6G8H0J2K4M6N8P2'];
const accepted = (run_id: string, priority: number) => ({ run_id, kind: 'inference:image:generate', status: 'queued', confidentiality: 'open', class: 'batch', priority, created_at: T0, warnings: [] });
const counts = { queued: 0, running: 1, succeeded: 1, failed: 0, canceled: 0 };

/** The batch routes' examples (docs/jobs.md, "Batches"), merged into OPERATION_EXAMPLES (shaped as its OperationExamples, not imported: examples.ts imports this). */
export const BATCH_EXAMPLES: Record<string, { request?: unknown; responses: Record<number, unknown> }> = {
  submitBatch: {
    request: {
      jobs: [
        { kind: 'inference:image:generate', input: { prompt: 'a red chair' }, class: 'batch' },
        { kind: 'inference:image:generate', input: { prompt: 'a blue chair' }, class: 'batch' },
      ],
    },
    responses: {
      202: { batch_id: BATCH, created_at: T0, size: 2, price: 8, jobs: [accepted(RUNS[0], 30), accepted(RUNS[1], 30)] },
      400: {
        error: {
          code: 'invalid_request',
          message: "1 of the batch's 2 jobs are invalid (the first, at index 1: input for inference:image:generate is invalid: /input/prompt must be string); nothing was created",
          details: { errors: [{ index: 1, code: 'invalid_request', message: 'input for inference:image:generate is invalid: /input/prompt must be string', details: { errors: [{ path: '/input/prompt', message: 'must be string' }] } }] },
        },
      },
      402: { error: { code: 'insufficient_credits', message: 'this batch costs 8 credits; the account has 5; nothing was created', details: { needed: 8, available: 5 } } },
      409: { error: { code: 'idempotency_conflict', message: 'this Idempotency-Key was used with a different request body', details: { batch_id: BATCH } } },
    },
  },
  getBatch: { responses: { 200: { batch_id: BATCH, created_at: T0, size: 2, price: 8, counts, terminal: false } } },
  streamBatchEvents: {
    responses: {
      200:
        `id: 0\nevent: status\ndata: {"run_id":"${RUNS[0]}","status":"running","terminal":false,"batch_id":"${BATCH}"}\n\n` +
        `id: 0\nevent: status\ndata: {"run_id":"${RUNS[1]}","status":"queued","terminal":false,"batch_id":"${BATCH}"}\n\n` +
        `id: 1\nevent: status\ndata: {"run_id":"${RUNS[0]}","status":"succeeded","terminal":true,"batch_id":"${BATCH}"}\n\n` +
        `id: 2\nevent: done\ndata: {"batch_id":"${BATCH}","size":2,"price":8,"counts":{"queued":0,"running":0,"succeeded":2,"failed":0,"canceled":0},"terminal":true}\n\n`,
    },
  },
  cancelBatch: { responses: { 200: { batch_id: BATCH, canceled: 1, cancel_requested: 1, already_terminal: 0 } } },
};
