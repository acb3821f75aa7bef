import { createHash } from 'node:crypto';
import { createReadStream, readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import type { JWK } from 'jose';
import { AttestationError, SwitchyardApiError, SwitchyardClient, verifyAttestation, type InputFileProof } from '../../../sdk/client/index.js';
import { FILE_ID_PATTERN } from '../../../models/ids.js';
import { parseInputArgs } from './input-args.js';
import type { RunIo } from './run.js';

export const VERIFY_USAGE = `switchyard verify <run_id> --jwks FILE|URL [options]

Checks a private run's attestation chain with the client library, trusting nothing the
gateway says: the verifier's signature on the GPU evidence, its claims and nonce binding, the
worker's receipt, and the sha256 of every artifact (downloaded now).

  --jwks FILE|URL          the attestation verifier's keys (NVIDIA's, or your own for the demo)
  --issuer ISS             expected issuer (default https://nras.attestation.nvidia.com)
  --input JSON|@FILE       the input you submitted: also check its hash against the receipt
  --input FIELD=@PATH      a file you submitted in FIELD, from disk: the receipt must sign its
                           bytes (as run's --input; repeatable). A file id in the input is
                           checked by the bytes the gateway serves for it, a data: URI or
                           https URL by its own bytes
  --json                   print the verified receipt and evidence as JSON
  --gateway URL            default $SWITCHYARD_URL, else http://127.0.0.1:8080
  --key KEY                default $SWITCHYARD_API_KEY

Exit status: 0 verified, 1 not verified (the reason is printed), 2 usage error.`;

async function sha256OfFile(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/**
 * The sha256 of the input files the library cannot hash from the input alone: local files
 * (FIELD=@PATH) from disk, and files of the Files API (a file id) from the bytes the gateway
 * serves for them, which is what the caller referred to.
 */
async function inputFileHashes(client: SwitchyardClient, input: Record<string, unknown>, local: Map<string, string>): Promise<Record<string, InputFileProof>> {
  const out: Record<string, InputFileProof> = {};
  for (const [field, path] of local) out[field] = await sha256OfFile(path);
  for (const [field, value] of Object.entries(input)) {
    if (local.has(field) || typeof value !== 'string' || !FILE_ID_PATTERN.test(value)) continue;
    out[field] = new Uint8Array(await (await client.files.content(value)).arrayBuffer());
  }
  return out;
}

/** `switchyard verify`: exit 0 only when the whole chain checks out. */
export async function verifyCommand(argv: string[], env: NodeJS.ProcessEnv = process.env, io: RunIo = process): Promise<number> {
  let runId: string;
  let opts: { jwks: string; issuer?: string; input?: string[]; json?: boolean; gateway?: string; key?: string };
  try {
    const parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: {
        jwks: { type: 'string' },
        issuer: { type: 'string' },
        input: { type: 'string', multiple: true },
        json: { type: 'boolean' },
        gateway: { type: 'string' },
        key: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
    if (parsed.values.help) {
      io.stdout.write(`${VERIFY_USAGE}\n`);
      return 0;
    }
    if (parsed.positionals.length !== 1) throw new Error('name exactly one run id');
    if (!parsed.values.jwks) throw new Error('--jwks is required: the verifier keys are what you trust, not the gateway');
    runId = parsed.positionals[0];
    opts = parsed.values as typeof opts;
  } catch (err) {
    io.stderr.write(`switchyard verify: ${(err as Error).message}\n\n${VERIFY_USAGE}\n`);
    return 2;
  }
  const key = opts.key ?? env.SWITCHYARD_API_KEY;
  if (!key) {
    io.stderr.write('switchyard verify: an API key is required (--key or SWITCHYARD_API_KEY)\n');
    return 2;
  }
  let jwks: { keys: JWK[] } | string;
  let input: Record<string, unknown> | undefined;
  let localFiles = new Map<string, string>();
  try {
    jwks = /^https?:\/\//.test(opts.jwks) ? opts.jwks : (JSON.parse(readFileSync(opts.jwks, 'utf8')) as { keys: JWK[] });
    if (opts.input?.length) ({ input, uploads: localFiles } = parseInputArgs(opts.input));
  } catch (err) {
    io.stderr.write(`switchyard verify: ${(err as Error).message}\n`);
    return 2;
  }
  const client = new SwitchyardClient({ baseUrl: opts.gateway ?? env.SWITCHYARD_URL ?? 'http://127.0.0.1:8080', apiKey: key });
  try {
    const job = await client.get(runId);
    const inputFiles = input && (await inputFileHashes(client, input, localFiles));
    const verified = await verifyAttestation(job, { jwks, issuer: opts.issuer, input, inputFiles });
    if (opts.json) io.stdout.write(`${JSON.stringify(verified)}\n`);
    else {
      const gpus = verified.evidence.gpus.map((g) => `${g.name} (driver ${g.driverVersion}, VBIOS ${g.vbiosVersion})`).join(', ');
      // A ranked run: the signer is its last rank, and it names the others, whose evidence it does not carry.
      const ranks = verified.receipt.ranks;
      const ran = ranks
        ? `ran in ${ranks.length} ranks on workers ${ranks.join(', ')}; its last rank, attested worker ${verified.receipt.worker_id} [${gpus}], signed the receipt`
        : `ran on attested worker ${verified.receipt.worker_id} [${gpus}]`;
      io.stdout.write(`verified: ${runId} ${ran}; ${verified.artifacts.length} artifact(s) match the receipt${input === undefined ? '' : ', and so does the input'}\n`);
    }
    return 0;
  } catch (err) {
    const why = err instanceof AttestationError ? `${err.code}: ${err.message}` : err instanceof SwitchyardApiError ? `${err.status} ${err.code}: ${err.message}` : (err as Error).message;
    io.stderr.write(`switchyard verify: NOT verified: ${why}\n`);
    return 1;
  }
}
