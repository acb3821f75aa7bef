import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { SwitchyardApiError, SwitchyardClient, type Batch, type JobResult, type SubmitJobBody } from '../../../sdk/client/index.js';

/** Streams the command writes to (run.ts's RunIo; not imported: run.ts loads this file). */
interface RunIo {
  stdout: { write(s: string): unknown };
  stderr: { write(s: string): unknown; isTTY?: boolean };
}

/**
 * `switchyard run --batch FILE.jsonl`: submits one job per line as one batch (docs/jobs.md,
 * "Batches"), prints the batch id, then follows the batch over its one event stream to the end,
 * printing each job's outcome as it ends. A caller of the API like `run`: no server code runs.
 */

export const RUN_BATCH_USAGE = `switchyard run --batch FILE.jsonl [options]

  --batch FILE             one job per line, each the body of POST /v1/jobs
                           ({"kind": ..., "input": {...}, ...}); blank lines are skipped; at
                           most 1,000 jobs, all accepted or none (no file inputs)
  --idempotency-key K      replay the first answer for the same key and file
  --json                   print JSON: the 202 answer, each job as it ends, then the batch
  --gateway URL            default $SWITCHYARD_URL, else http://127.0.0.1:8080
  --key KEY                default $SWITCHYARD_API_KEY

Prints the batch id, then one line per job as it ends: its run id, its status, and its
artifact URLs (succeeded) or its error (failed, canceled); then the counts on stderr.
Exit status: 0 every job succeeded, 1 some did not or the batch was refused, 2 usage error,
130 interrupted (Ctrl-C stops following; the jobs keep going).`;

class UsageError extends Error {}

interface BatchArgs {
  jobs: SubmitJobBody[];
  gateway: string;
  key: string;
  json: boolean;
  idempotencyKey?: string;
}

function parseBatchArgs(argv: string[], env: NodeJS.ProcessEnv): BatchArgs | 'help' {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      strict: true,
      options: {
        batch: { type: 'string' },
        'idempotency-key': { type: 'string' },
        json: { type: 'boolean' },
        gateway: { type: 'string' },
        key: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const { values } = parsed;
  if (values.help) return 'help';
  if (!values.batch) throw new UsageError('--batch needs a file: --batch jobs.jsonl');
  let text: string;
  try {
    text = readFileSync(values.batch, 'utf8');
  } catch (err) {
    throw new UsageError(`cannot read ${values.batch}: ${(err as Error).message}`);
  }
  const jobs: SubmitJobBody[] = [];
  text.split('\n').forEach((line, i) => {
    if (line.trim() === '') return;
    let job: unknown;
    try {
      job = JSON.parse(line);
    } catch (err) {
      throw new UsageError(`${values.batch} line ${i + 1} is not JSON: ${(err as Error).message}`);
    }
    if (!job || typeof job !== 'object' || Array.isArray(job)) throw new UsageError(`${values.batch} line ${i + 1} is not a JSON object (a job body)`);
    jobs.push(job as SubmitJobBody);
  });
  if (jobs.length === 0) throw new UsageError(`${values.batch} holds no job`);
  const gateway = values.gateway ?? env.SWITCHYARD_URL ?? 'http://127.0.0.1:8080';
  if (!/^https?:\/\//.test(gateway)) throw new UsageError(`--gateway must be an http:// or https:// URL, not ${JSON.stringify(gateway)}`);
  const key = values.key ?? env.SWITCHYARD_API_KEY;
  if (!key) throw new UsageError('run needs an API key: --key KEY or SWITCHYARD_API_KEY');
  return { jobs, gateway, key, json: values.json ?? false, idempotencyKey: values['idempotency-key'] };
}

/** Runs `switchyard run --batch ...`; resolves with the exit status and never throws. */
export async function runBatchCommand(argv: string[], env: NodeJS.ProcessEnv = process.env, io: RunIo = process): Promise<number> {
  let args: BatchArgs | 'help';
  try {
    args = parseBatchArgs(argv, env);
  } catch (err) {
    io.stderr.write(`switchyard run: ${(err as Error).message}\n\n${RUN_BATCH_USAGE}\n`);
    return 2;
  }
  if (args === 'help') {
    io.stdout.write(`${RUN_BATCH_USAGE}\n`);
    return 0;
  }
  const client = new SwitchyardClient({ baseUrl: args.gateway, apiKey: args.key });
  let batchId: string;
  try {
    const submitted = await client.submitBatch(args.jobs, { idempotencyKey: args.idempotencyKey });
    batchId = submitted.batch_id;
    io.stdout.write(args.json ? `${JSON.stringify(submitted.raw)}\n` : `${batchId}\n`);
    io.stderr.write(`${batchId}: ${submitted.size} jobs accepted (${submitted.price} credits reserved)${submitted.replayed ? ', replayed' : ''}\n`);
  } catch (err) {
    io.stderr.write(`switchyard run: ${describe(err)}\n`);
    return 1;
  }
  const interrupt = new AbortController();
  const onSigint = () => interrupt.abort();
  process.once('SIGINT', onSigint);
  const reported = new Set<string>();
  let final: Batch | undefined;
  try {
    for await (const ev of client.streamBatch(batchId, { signal: interrupt.signal })) {
      if (ev.event === 'done') final = ev.data;
      else if (ev.data.terminal && !reported.has(ev.data.run_id)) {
        reported.add(ev.data.run_id);
        io.stdout.write(args.json ? `${JSON.stringify(ev.data.raw)}\n` : `${outcome(ev.data)}\n`);
      }
    }
  } catch (err) {
    if (interrupt.signal.aborted) {
      io.stderr.write(`switchyard run: stopped following ${batchId}; its jobs go on. Follow it with GET /v1/batches/${batchId}\n`);
      return 130;
    }
    io.stderr.write(`switchyard run: lost ${batchId}: ${describe(err)}\n`);
    return 1;
  } finally {
    process.removeListener('SIGINT', onSigint);
  }
  if (!final) return 1; // unreachable: the stream ends only after done
  if (args.json) io.stdout.write(`${JSON.stringify(final)}\n`);
  const counts = Object.entries(final.counts).filter(([, n]) => n > 0).map(([s, n]) => `${n} ${s}`);
  io.stderr.write(`${batchId}: ${counts.join(', ') || 'no jobs left'}\n`);
  return final.counts.succeeded === final.size ? 0 : 1;
}

/** One ended job on one line: `run_id status url...` or `run_id status code: message`. */
function outcome(job: JobResult): string {
  if (job.status === 'succeeded') return [job.run_id, job.status, ...(job.output?.urls ?? [])].join(' ');
  return `${job.run_id} ${job.status} ${job.error ? `${job.error.code}: ${job.error.message}` : ''}`.trimEnd();
}

function describe(err: unknown): string {
  if (err instanceof SwitchyardApiError) return `${err.status} ${err.code}: ${err.message}${err.details ? ` ${JSON.stringify(err.details)}` : ''}`;
  return err instanceof Error ? err.message : String(err);
}
