import { ApiError, NotFoundError } from '../../../models/errors.js';
import { RUN_ID_PATTERN } from '../../../models/ids.js';
import type { RouteSpec } from '../route-spec.js';
import type { JobService } from '../../services/jobs/job-service.js';
import type { SseStreams } from '../sse-streams.js';

/** Last-Event-ID (or `?after=` for clients that cannot set headers): null on a fresh connection. */
function resumeFrom(header: string, query: unknown): number | null {
  const raw = header !== '' ? header : typeof query === 'string' ? query : '';
  if (raw === '') return null;
  if (!/^\d{1,15}$/.test(raw.trim())) throw new ApiError('invalid_request', 'Last-Event-ID must be an event id this stream sent (a whole number)');
  return Number(raw.trim());
}

export interface EventRoutesOptions {
  jobs: JobService;
  /** The process's open SSE streams. */
  sse: SseStreams;
}

export function eventRoutes({ jobs, sse }: EventRoutesOptions): RouteSpec[] {
  return [
    {
      method: 'get',
      path: '/v1/jobs/{run_id}/events',
      operationId: 'streamJobEvents',
      summary: 'Follow a job as server-sent events',
      tag: 'jobs',
      auth: 'account',
      query: { type: 'object', properties: { after: { type: 'string', pattern: '^\\d{1,15}$', description: 'Same as Last-Event-ID' } }, additionalProperties: false },
      headers: [
        {
          name: 'Last-Event-ID',
          description: 'Resume: every event after this id, then the live ones (EventSource sends it on reconnect).',
          schema: { type: 'string', pattern: '^\\d{1,15}$' },
        },
      ],
      responses: {
        200: {
          description:
            'text/event-stream. Frames carry `id` (per-run sequence number), `event` (status, progress, log, output, done) and one JSON `data` line. ' +
            'A fresh connection starts with `status` (the job); `done` (the final job) is last, then the server closes. `: ping` comments keep idle streams open.',
          mediaType: 'text/event-stream',
        },
        404: { description: 'No such run for this account' },
      },
      async handler(ctx) {
        const runId = ctx.params.run_id;
        if (!RUN_ID_PATTERN.test(runId)) throw new NotFoundError('run');
        const after = resumeFrom(ctx.get('Last-Event-ID'), ctx.query.after);
        const run = await jobs.get(ctx.state.principal!.accountId, runId);
        // From here the response is a stream written by SseStreams, not a Koa body.
        // (Headers set so far, X-Request-Id among them, are already on ctx.res.)
        ctx.respond = false;
        await sse.open(ctx.res, run, after);
      },
    },
  ];
}
