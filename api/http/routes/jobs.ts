import { ApiError, NotFoundError } from '../../../models/errors.js';
import { RUN_ID_PATTERN } from '../../../models/ids.js';
import type { RunStatus } from '../../../models/types.js';
import type { Ctx } from '../context.js';
import { acceptedView, jobView } from '../../contract/presenters.js';
import { listCursor } from '../cursor.js';
import type { RouteSpec } from '../route-spec.js';
import * as S from '../../contract/schemas.js';
import { JOB_INCLUDES, getJobQuery } from '../../contract/job-input-schemas.js';
import type { RunFollower } from '../../services/events/run-follower.js';
import type { JobService, SubmitJobBody } from '../../services/jobs/job-service.js';

// Printable ASCII without spaces at the ends, as Stripe and the IETF draft allow.
const IDEMPOTENCY_KEY = /^[\x21-\x7e]([\x20-\x7e]{0,253}[\x21-\x7e])?$/;

function runIdParam(ctx: Ctx): string {
  const runId = ctx.params.run_id;
  if (!RUN_ID_PATTERN.test(runId)) throw new NotFoundError('run');
  return runId;
}

/** Seconds of `Prefer: wait=N` (RFC 7240), or 0 when the caller did not ask to wait. */
function preferredWait(header: string): number {
  const m = /(?:^|[,;])\s*wait\s*=\s*"?([^",;\s]*)"?/i.exec(header);
  if (!m) return 0;
  if (!/^\d{1,4}$/.test(m[1]) || Number(m[1]) > MAX_WAIT_SECONDS) {
    throw new ApiError('invalid_request', `Prefer: wait=N takes whole seconds from 0 to ${MAX_WAIT_SECONDS}`);
  }
  return Number(m[1]);
}

const MAX_WAIT_SECONDS = 60;

/** The extra fields `?include=a,b` asks for; a name the job object has no such field for is a 400. */
function includes(param: string | undefined): Set<string> {
  if (param === undefined) return new Set();
  const names = param.split(',');
  const unknown = names.find((n) => !(JOB_INCLUDES as readonly string[]).includes(n));
  if (unknown !== undefined) {
    throw new ApiError('invalid_request', `include takes a comma-separated list of ${JOB_INCLUDES.join(', ')}; ${JSON.stringify(unknown)} is none of them`, {
      details: { path: '/include', allowed: [...JOB_INCLUDES] },
    });
  }
  return new Set(names);
}

const cursor = listCursor(RUN_ID_PATTERN);

export interface JobRoutesOptions {
  jobs: JobService;
  /** Follows a run to its end for `Prefer: wait`. */
  follower: RunFollower;
  /** Aborted when the gateway starts to stop: a `Prefer: wait` answers its 202 at once instead of being cut. */
  shutdown: AbortSignal;
}

export function jobRoutes({ jobs, follower, shutdown }: JobRoutesOptions): RouteSpec[] {
  return [
    {
      method: 'post',
      path: '/v1/jobs',
      operationId: 'submitJob',
      summary: 'Submit a job',
      tag: 'jobs',
      auth: 'account',
      // A plain submission runs its gate inside its create's script: one Redis round trip fewer.
      gateInHandler: true,
      body: S.submitJobBody,
      publishedBody: { $ref: '#/components/schemas/JobRequest' },
      headers: [
        {
          name: 'Idempotency-Key',
          description: 'The same key with the same body within 24 h replays the first answer; with another body, 409 idempotency_conflict.',
          schema: { type: 'string', minLength: 1, maxLength: 255 },
        },
        {
          name: 'Prefer',
          description:
            '`wait=N` (N <= 60 s): hold the answer until the run ends, then 201 with the finished job; if it has not ended by then, the usual 202. ' +
            'Either way the answer carries the run id, so a client that gives up early can still follow the run.',
          schema: { type: 'string', pattern: 'wait=\\d+' },
        },
      ],
      responses: {
        201: { description: 'Finished within `Prefer: wait`: the job (terminal)', schema: S.job, headers: { Location: 'The job URL', 'Preference-Applied': 'wait=N' } },
        202: { description: 'Accepted and queued', schema: S.jobAccepted, headers: { Location: 'The job URL' } },
        402: { description: 'Balance short of the kind price' },
        409: { description: 'Idempotency-Key reused with another body' },
      },
      async handler(ctx) {
        const key = ctx.get('Idempotency-Key');
        if (key !== '' && !IDEMPOTENCY_KEY.test(key)) {
          throw new ApiError('invalid_request', 'Idempotency-Key must be 1 to 255 printable ASCII characters');
        }
        const wait = preferredWait(ctx.get('Prefer'));
        // A caller that hangs up before its run exists gets none: an https input still being
        // fetched is cut, and nothing is created. Once the run exists, hanging up stops only the
        // `Prefer: wait`, as a gateway shutting down does (202 now, the caller follows the run by
        // id). Listeners, not AbortSignal.any: on Node 20 every any() over the long-lived
        // shutdown signal stays referenced by it (nodejs#55351).
        const stop = new AbortController();
        const abort = () => stop.abort();
        ctx.res.once('close', abort);
        try {
          const { run, replayed } = await jobs.submit(ctx.state.principal!.accountId, ctx.state.body as SubmitJobBody, key || undefined, ctx.state.gate, stop.signal, ctx.state.principal!.keyId);
          ctx.set('Location', `/v1/jobs/${run.run_id}`);
          if (replayed) ctx.set('Idempotent-Replayed', 'true');
          if (wait > 0) {
            ctx.set('Preference-Applied', `wait=${wait}`);
            shutdown.addEventListener('abort', abort, { once: true });
            if (shutdown.aborted) abort();
            try {
              const done = await follower.waitForTerminal(run.run_id, wait * 1000, stop.signal);
              if (done) {
                ctx.status = 201;
                ctx.body = jobView(done);
                return;
              }
            } catch (err) {
              // The run is accepted and paid for: answer its 202 rather than an error a client
              // might retry into a second run.
              jobs.log.warn({ err, runId: run.run_id }, 'Prefer: wait failed; answering 202');
            } finally {
              shutdown.removeEventListener('abort', abort);
            }
          }
          ctx.status = 202;
          ctx.body = acceptedView(run);
        } finally {
          ctx.res.off('close', abort);
        }
      },
    },
    {
      method: 'get',
      path: '/v1/jobs',
      operationId: 'listJobs',
      summary: 'List jobs, newest first',
      tag: 'jobs',
      auth: 'account',
      query: S.listJobsQuery,
      responses: { 200: { description: 'A page of jobs', schema: S.jobList } },
      async handler(ctx) {
        const q = ctx.query as { status?: RunStatus; kind?: string; batch_id?: string; limit?: string; cursor?: string };
        const limit = q.limit === undefined ? 20 : Number(q.limit);
        if (!(limit >= 1 && limit <= 100)) throw new ApiError('invalid_request', 'limit must be between 1 and 100');
        const before = q.cursor ? cursor.decode(q.cursor) : undefined;
        const { runs, next } = await jobs.list(ctx.state.principal!.accountId, { status: q.status, kind: q.kind, batch_id: q.batch_id, limit, before });
        const queue = await jobs.queueStates(runs);
        ctx.body = {
          data: runs.map((r, i) => jobView(r, queue[i])),
          // A page may be short, even empty, with more to come: only a null cursor says the end.
          next_cursor: next === null ? null : cursor.encode(next),
        };
      },
    },
    {
      method: 'get',
      path: '/v1/jobs/{run_id}',
      operationId: 'getJob',
      summary: 'Get a job; poll until `terminal` is true',
      tag: 'jobs',
      auth: 'account',
      query: getJobQuery,
      responses: { 200: { description: 'The job; with `include=input`, its input too', schema: S.job }, 404: { description: 'No such run for this account' } },
      async handler(ctx) {
        const include = includes(ctx.query.include as string | undefined);
        const run = await jobs.get(ctx.state.principal!.accountId, runIdParam(ctx));
        const view = jobView(run, await jobs.queueState(run));
        ctx.body = include.has('input') ? { ...view, input: run.input } : view;
      },
    },
    {
      method: 'post',
      path: '/v1/jobs/{run_id}/cancel',
      operationId: 'cancelJob',
      summary: 'Cancel a job',
      tag: 'jobs',
      auth: 'account',
      responses: {
        200: { description: 'The job after the cancel (queued runs are canceled at once)', schema: S.job },
        404: { description: 'No such run for this account' },
        409: { description: 'The run is already terminal' },
      },
      async handler(ctx) {
        const run = await jobs.cancel(ctx.state.principal!.accountId, runIdParam(ctx));
        ctx.body = jobView(run, await jobs.queueState(run));
      },
    },
  ];
}
