import { ApiError, NotFoundError } from '../../../models/errors.js';
import { BATCH_ID_PATTERN } from '../../../models/ids.js';
import * as B from '../../contract/batch-schemas.js';
import { batchView } from '../../contract/batch-view.js';
import { acceptedView } from '../../contract/presenters.js';
import type { BatchFollower } from '../../services/events/batch-follower.js';
import type { BatchService, SubmitBatchBody } from '../../services/jobs/batch-service.js';
import type { Ctx } from '../context.js';
import type { RouteSpec } from '../route-spec.js';
import type { SseStreams } from '../sse-streams.js';

// As POST /v1/jobs takes it (routes/jobs.ts).
const IDEMPOTENCY_KEY = /^[\x21-\x7e]([\x20-\x7e]{0,253}[\x21-\x7e])?$/;

function batchIdParam(ctx: Ctx): string {
  const id = ctx.params.batch_id;
  if (!BATCH_ID_PATTERN.test(id)) throw new NotFoundError('batch');
  return id;
}

export interface BatchRoutesOptions {
  batches: BatchService;
  follower: BatchFollower;
  sse: SseStreams;
}

/** Batches of jobs (docs/jobs.md, "Batches"). */
export function batchRoutes({ batches, follower, sse }: BatchRoutesOptions): RouteSpec[] {
  return [
    {
      method: 'post',
      path: '/v1/jobs/batch',
      operationId: 'submitBatch',
      summary: 'Submit a batch of jobs: all accepted, or none',
      tag: 'jobs',
      auth: 'account',
      body: B.submitBatchBody,
      headers: [
        {
          name: 'Idempotency-Key',
          description: 'The same key with the same body within 24 h replays the first answer (the same batch); with another body, 409 idempotency_conflict.',
          schema: { type: 'string', minLength: 1, maxLength: 255 },
        },
      ],
      responses: {
        202: { description: 'Every job accepted and queued', schema: B.batchAccepted, headers: { Location: 'The batch URL' } },
        400: { description: 'A job is invalid (details.errors: each refused job by index), or more than 1,000 jobs (details.max); nothing was created' },
        402: { description: 'Balance short of the total price; nothing was created' },
        409: { description: 'Idempotency-Key reused with another body' },
      },
      async handler(ctx) {
        const key = ctx.get('Idempotency-Key');
        if (key !== '' && !IDEMPOTENCY_KEY.test(key)) throw new ApiError('invalid_request', 'Idempotency-Key must be 1 to 255 printable ASCII characters');
        const { batch, runs, replayed } = await batches.submit(ctx.state.principal!.accountId, ctx.state.body as SubmitBatchBody, key || undefined, ctx.state.principal!.keyId);
        ctx.set('Location', `/v1/batches/${batch.batch_id}`);
        if (replayed) ctx.set('Idempotent-Replayed', 'true');
        ctx.status = 202;
        ctx.body = { batch_id: batch.batch_id, created_at: batch.created_at, size: batch.run_ids.length, price: batch.price, jobs: runs.map(acceptedView) };
      },
    },
    {
      method: 'get',
      path: '/v1/batches/{batch_id}',
      operationId: 'getBatch',
      summary: 'Get a batch: its jobs by status',
      tag: 'jobs',
      auth: 'account',
      responses: { 200: { description: 'The batch', schema: B.batch }, 404: { description: 'No such batch for this account' } },
      async handler(ctx) {
        ctx.body = batchView(await batches.summary(ctx.state.principal!.accountId, batchIdParam(ctx)));
      },
    },
    {
      method: 'get',
      path: '/v1/batches/{batch_id}/events',
      operationId: 'streamBatchEvents',
      summary: "Follow every job of a batch as one stream of server-sent events",
      tag: 'jobs',
      auth: 'account',
      query: { type: 'object', properties: { after: { type: 'string', pattern: '^\\d{1,15}$', description: 'Same as Last-Event-ID' } }, additionalProperties: false },
      headers: [{ name: 'Last-Event-ID', description: "Resume: every event of the batch's log after this id, then the live ones.", schema: { type: 'string', pattern: '^\\d{1,15}$' } }],
      responses: {
        200: {
          description:
            'text/event-stream. A fresh connection starts with one `status` per job (the job as it is); then a `status` (the job) each time a job changes status; ' +
            'once every job has ended, `done` (the batch, as GET /v1/batches/{batch_id}) and the server closes.',
          mediaType: 'text/event-stream',
        },
        404: { description: 'No such batch for this account' },
      },
      async handler(ctx) {
        const raw = ctx.get('Last-Event-ID') || (typeof ctx.query.after === 'string' ? ctx.query.after : '');
        if (raw !== '' && !/^\d{1,15}$/.test(raw.trim())) throw new ApiError('invalid_request', 'Last-Event-ID must be an event id this stream sent (a whole number)');
        const after = raw === '' ? null : Number(raw.trim());
        const batch = await batches.get(ctx.state.principal!.accountId, batchIdParam(ctx));
        ctx.respond = false;
        await sse.openWith(ctx.res, (sink) => follower.follow(batch, after, sink));
      },
    },
    {
      method: 'post',
      path: '/v1/batches/{batch_id}/cancel',
      operationId: 'cancelBatch',
      summary: 'Cancel every job of a batch that has not ended',
      tag: 'jobs',
      auth: 'account',
      responses: { 200: { description: 'What the cancel did, in counts of jobs', schema: B.batchCanceled }, 404: { description: 'No such batch for this account' } },
      async handler(ctx) {
        const batchId = batchIdParam(ctx);
        ctx.body = { batch_id: batchId, ...(await batches.cancel(ctx.state.principal!.accountId, batchId)) };
      },
    },
  ];
}
