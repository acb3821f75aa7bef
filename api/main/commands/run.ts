import { parseArgs } from 'node:util';
import { parseInputArgs } from './input-args.js';
import { SwitchyardClient, SwitchyardApiError, type JobResult, type SubmitJobBody, type SwitchyardFile } from '../../../sdk/client/index.js';

/**
 * `switchyard run`: submits a job with the client library (sdk/client) and, with --wait,
 * follows it over SSE to the end. It talks to a gateway over HTTP only, like any caller.
 */

export const RUN_USAGE = `switchyard run <kind> --input '<json>' [options]
       switchyard run --batch FILE.jsonl [options]   (options: switchyard run --batch FILE --help)

  --input JSON|@FILE       the job's input object (JSON text, or @path of a JSON file)
  --input FIELD=@PATH      upload the local file PATH and put its file id in FIELD, one of the
                           kind's file fields (image, mesh, audio, reference_audio)
  --input FIELD=TEXT       set FIELD to the string TEXT
                           --input may be repeated: at most one JSON|@FILE object, and each
                           FIELD=... sets one field over it, e.g.
                           --input image=@photo.png --input '{"seed":3}'
  --confidentiality T      open (default), trusted or private
  --class C                interactive, standard (default) or batch
  --idempotency-key K      replay the first answer for the same key and body
  --wait                   follow the run to its end: progress on a terminal (stderr), log lines
                           (stderr), then the artifact URLs one per line (stdout)
  --json                   print JSON instead: the 202 answer, or with --wait the final job
  --gateway URL            default $SWITCHYARD_URL, else http://127.0.0.1:8080
  --key KEY                default $SWITCHYARD_API_KEY

Exit status: 0 submitted (or, with --wait, succeeded), 1 failed, canceled or refused,
2 usage error, 130 interrupted (Ctrl-C stops following; the run keeps going).`;

/** Streams an interactive CLI writes to; tests pass their own. */
export interface RunIo {
  stdout: { write(s: string): unknown };
  stderr: { write(s: string): unknown; isTTY?: boolean };
}

class RunUsageError extends Error {}

const TIERS = ['open', 'trusted', 'private'] as const;
const CLASSES = ['interactive', 'standard', 'batch'] as const;

/** `\r[#####.....] 50% message`, the progress line drawn on a terminal. */
export function progressLine(progress: number, message?: string, width = 20): string {
  const p = Math.min(1, Math.max(0, progress));
  const filled = Math.round(p * width);
  const text = `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${String(Math.round(p * 100)).padStart(3)}%`;
  return `\r${text}${message ? ` ${message}` : ''}\x1b[K`;
}

interface RunArgs {
  body: SubmitJobBody;
  /** FIELD=@PATH inputs, by field: their values in `body.input` are `@PATH`, uploaded by submit(). */
  uploads: Map<string, string>;
  gateway: string;
  key: string;
  wait: boolean;
  json: boolean;
  idempotencyKey?: string;
}

function parseRunArgs(argv: string[], env: NodeJS.ProcessEnv): RunArgs | 'help' {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: {
        input: { type: 'string', multiple: true },
        confidentiality: { type: 'string' },
        class: { type: 'string' },
        'idempotency-key': { type: 'string' },
        wait: { type: 'boolean' },
        json: { type: 'boolean' },
        gateway: { type: 'string' },
        key: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (err) {
    throw new RunUsageError((err as Error).message);
  }
  const { values, positionals } = parsed;
  if (values.help) return 'help';
  if (positionals.length !== 1) throw new RunUsageError(positionals.length ? `run takes one kind, got ${positionals.join(' ')}` : 'run needs a kind, e.g. inference:image:generate');
  if (values.input === undefined || values.input.length === 0) throw new RunUsageError(`run needs --input '<json object>' or --input FIELD=...`);
  const { input, uploads } = parseInputArgs(values.input);
  const body: SubmitJobBody = { kind: positionals[0], input };
  if (values.confidentiality !== undefined) {
    if (!(TIERS as readonly string[]).includes(values.confidentiality)) throw new RunUsageError(`--confidentiality must be ${TIERS.join(', ')}`);
    body.confidentiality = values.confidentiality as SubmitJobBody['confidentiality'];
  }
  if (values.class !== undefined) {
    if (!(CLASSES as readonly string[]).includes(values.class)) throw new RunUsageError(`--class must be ${CLASSES.join(', ')}`);
    body.class = values.class as SubmitJobBody['class'];
  }
  const gateway = values.gateway ?? env.SWITCHYARD_URL ?? 'http://127.0.0.1:8080';
  let protocol = '';
  try {
    protocol = new URL(gateway).protocol;
  } catch {
    // reported below
  }
  if (protocol !== 'http:' && protocol !== 'https:') throw new RunUsageError(`--gateway must be an http:// or https:// URL, not ${JSON.stringify(gateway)}`);
  const key = values.key ?? env.SWITCHYARD_API_KEY;
  if (!key) throw new RunUsageError('run needs an API key: --key KEY or SWITCHYARD_API_KEY');
  return { body, uploads, gateway, key, wait: values.wait ?? false, json: values.json ?? false, idempotencyKey: values['idempotency-key'] };
}

/** Runs `switchyard run ...`; resolves with the exit status and never throws. */
export async function runCommand(argv: string[], env: NodeJS.ProcessEnv = process.env, io: RunIo = process): Promise<number> {
  // A batch of jobs from a JSONL file (run-batch.ts), followed over its one stream.
  if (argv.some((a) => a === '--batch' || a.startsWith('--batch='))) return (await import('./run-batch.js')).runBatchCommand(argv, env, io);
  let args: RunArgs | 'help';
  try {
    args = parseRunArgs(argv, env);
  } catch (err) {
    io.stderr.write(`switchyard run: ${(err as Error).message}\n\n${RUN_USAGE}\n`);
    return 2;
  }
  if (args === 'help') {
    io.stdout.write(`${RUN_USAGE}\n`);
    return 0;
  }
  const client = new SwitchyardClient({ baseUrl: args.gateway, apiKey: args.key });
  let accepted: JobResult;
  try {
    if (args.uploads.size) {
      // FIELD=@PATH uploads only into file fields: a prompt=@notes.txt would otherwise become a
      // file id (or, left to submit(), the text "@notes.txt"). An unknown kind is the gateway's to refuse.
      const fileFields = await client.fileFields(args.body.kind);
      for (const [field, file] of args.uploads) {
        if (fileFields && !fileFields.includes(field)) {
          io.stderr.write(`switchyard run: --input ${field}=@${file}: ${field} is not a file field of ${args.body.kind} (its file fields: ${fileFields.join(', ') || 'none'})\n\n${RUN_USAGE}\n`);
          return 2;
        }
      }
    }
    const onUpload = (field: string, file: SwitchyardFile) => io.stderr.write(`uploaded ${args.uploads.get(field) ?? field} as ${file.id} (${field}, ${file.content_type}, ${file.size} bytes)\n`);
    accepted = await client.submit(args.body, { idempotencyKey: args.idempotencyKey, onUpload });
  } catch (err) {
    io.stderr.write(`switchyard run: ${describe(err)}\n`);
    return 1;
  }
  if (!args.wait) {
    io.stdout.write(args.json ? `${JSON.stringify(accepted.raw)}\n` : `${accepted.run_id}\n`);
    return 0;
  }
  return follow(client, accepted, args.json, io);
}

/** --wait: the run's events until `done`; Ctrl-C stops following but leaves the run alone. */
async function follow(client: SwitchyardClient, accepted: JobResult, json: boolean, io: RunIo): Promise<number> {
  const runId = accepted.run_id;
  const tty = io.stderr.isTTY === true;
  const interrupt = new AbortController();
  const onSigint = () => interrupt.abort();
  process.once('SIGINT', onSigint);
  io.stderr.write(`${runId} ${accepted.status} (${accepted.kind})\n`);
  let bar = '';
  const say = (line: string) => io.stderr.write(`${bar ? '\r\x1b[K' : ''}${line}\n${bar}`);
  let final: JobResult | undefined;
  let status = accepted.status as string;
  try {
    for await (const ev of client.stream(runId, { signal: interrupt.signal })) {
      if (ev.event === 'progress' && tty) {
        bar = progressLine(ev.data.progress, ev.data.message);
        io.stderr.write(bar);
      } else if (ev.event === 'log') {
        say(ev.data.line);
      } else if (ev.event === 'status' && ev.data.status !== status) {
        status = ev.data.status;
        if (ev.data.terminal && bar) {
          io.stderr.write('\r\x1b[K'); // the outcome line replaces the bar
          bar = '';
        }
        say(`${runId} ${status}`);
      } else if (ev.event === 'done') {
        final = ev.data;
      }
    }
  } catch (err) {
    if (bar) io.stderr.write('\n');
    if (interrupt.signal.aborted) {
      io.stderr.write(`switchyard run: stopped following ${runId}; the run goes on. Follow it with GET /v1/jobs/${runId}\n`);
      io.stdout.write(`${runId}\n`);
      return 130;
    }
    io.stderr.write(`switchyard run: lost ${runId}: ${describe(err)}\n`);
    return 1;
  } finally {
    process.removeListener('SIGINT', onSigint);
  }
  if (bar) io.stderr.write('\n');
  if (!final) return 1; // unreachable: the stream ends only after done
  if (json) io.stdout.write(`${JSON.stringify(final.raw)}\n`);
  if (final.status === 'succeeded') {
    if (!json) for (const url of final.output?.urls ?? []) io.stdout.write(`${url}\n`);
    return 0;
  }
  const why = final.error ? `${final.error.code}: ${final.error.message}` : 'no error given';
  io.stderr.write(`switchyard run: ${runId} ${final.status} (${why})\n`);
  return 1;
}

function describe(err: unknown): string {
  if (err instanceof SwitchyardApiError) {
    const details = err.details ? ` ${JSON.stringify(err.details)}` : '';
    return `${err.status} ${err.code}: ${err.message}${details}`;
  }
  return err instanceof Error ? err.message : String(err);
}
