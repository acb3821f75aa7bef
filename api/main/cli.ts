import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { ChildProcess } from 'node:child_process';
import { ConfigError, loadConfig, type Config } from './config.js';
import { redisAnswers, startLocalRedis } from './dev/dev-redis.js';
import { startDevFleet } from './dev/dev-fleet.js';
import { devAdminToken } from './dev/dev-admin-token.js';
import { Gateway } from '../composition/gateway.js';
import { ApiKeyAuthenticator } from '../services/auth/api-key-authenticator.js';
import { RequestGate } from '../services/auth/request-gate.js';
import { createStores } from '../../models/create-stores.js';
import { createRedis } from '../../models/redis-connection.js';
import { RedisKeys } from '../../models/redis/keys.js';
import { hashSecret, lookupIdOf, sameHash } from '../../models/credentials.js';
import type { Stores } from '../../models/stores.js';

const USAGE = `switchyard <command>

Commands:
  serve                                  run the gateway (what npm start runs)
  dev [--allow-local PORTS]              run the gateway for development: starts a local redis-server
                                         if none answers, prints a ready API key, a curl line, the
                                         switchyard run setup and the queue board's login;
                                         --allow-local 8080,9000: outbound calls (tools, webhooks) may
                                         use plain http and reach loopback on those ports (UNSAFE
                                         outside development; serve refuses it)
  accounts create --name N [--credits C] create an account; prints it and its first API key as JSON
  keys create --account ID [--name N]    create another API key for an account; prints it as JSON
  worker --gateway URL --token T --kinds k1,k2|all [--tier open|trusted|private] [--slots N]
         [--engine demo] [--demo-delay-ms N] [--models m1,m2] [--attestation-key FILE]
                                         run a worker that connects to a gateway and runs its jobs with
                                         an engine (defaults: tier open, 1 slot, engine demo, 1000 ms);
                                         --models: the LLM models it serves, listed by GET /v1/models
                                         (default for the demo engine: demo-llm);
                                         the token may also come from SWITCHYARD_WORKER_TOKEN; stops
                                         gracefully on SIGTERM/SIGINT (a second signal aborts running jobs);
                                         --tier private needs --attestation-key: a local verifier's ES384
                                         private JWK (kid, optional iss) that signs TEST evidence, which
                                         proves nothing about the hardware (docs/confidentiality.md)
  run <kind> --input JSON [--wait] [--json] [--gateway URL] [--key KEY]
                                         submit a job with the client library; --wait follows it to
                                         the end (switchyard run --help for all options)
  verify <run_id> --jwks FILE|URL        check a private run's attestation chain and artifacts
                                         with the client library (switchyard verify --help)

Configuration comes from the environment; see README.md.`;

async function withStores<T>(config: Config, fn: (stores: Stores, auth: ApiKeyAuthenticator) => Promise<T>): Promise<T> {
  const redis = createRedis(config.redisUrl, { name: 'cli' });
  try {
    await redis.ping();
    const stores = await createStores({ redis, redisPrefix: config.redisPrefix, mongoUrl: config.mongoUrl, mongoDb: config.mongoDb, retentionSeconds: config.runRetentionSeconds, fairShareStep: config.fairShareStep });
    const gate = new RequestGate({ redis, keys: new RedisKeys(config.redisPrefix), perSecond: 0, burst: 1 });
    try {
      return await fn(stores, new ApiKeyAuthenticator({ apiKeys: stores.apiKeys, gate, cacheTtlMs: 0 }));
    } finally {
      await stores.close();
    }
  } finally {
    redis.disconnect();
  }
}

interface ServeHooks {
  onReady?: (gw: Gateway, url: string) => Promise<void>;
  /** Runs first on SIGTERM/SIGINT, while the gateway still serves. */
  beforeStop?: () => Promise<void>;
  /** Runs last, after the gateway stopped. */
  cleanup?: () => void;
}

async function serve(config: Config, hooks: ServeHooks = {}): Promise<void> {
  const gateway = new Gateway({ config });
  // Handlers first: a supervisor's SIGTERM during start-up also stops the gateway cleanly,
  // once what has started can be stopped.
  let started: Promise<unknown> = Promise.resolve();
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) {
      // A second signal: the operator does not want to wait. What is in flight is recovered
      // as after a crash (leases lapse and are requeued, the reconciler enqueues).
      gateway.log.warn({ signal }, 'second signal: exiting without finishing the shutdown');
      process.exit(1);
    }
    stopping = true;
    gateway.log.info({ signal }, 'shutting down');
    await started.catch(() => {});
    await hooks.beforeStop?.().catch((err) => gateway.log.error({ err }, 'unclean shutdown'));
    await gateway.stop().catch((err) => gateway.log.error({ err }, 'unclean shutdown'));
    hooks.cleanup?.();
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
  const starting = gateway.start();
  started = starting;
  let url: string;
  try {
    ({ url } = await starting);
  } catch (err) {
    // Stopped while starting: the stop under way ends the process (exit 0), not this failure.
    if (stopping) return;
    throw err;
  }
  if (stopping) return;
  await hooks.onReady?.(gateway, url);
}

/** A path relative to the working directory when it lies below it, else as given. */
const shortPath = (file: string) => (path.relative('.', file).startsWith('..') ? file : path.relative('.', file));

/** The dev account's key, kept under DATA_DIR so restarts print the same one. */
async function devKey(gateway: Gateway): Promise<string> {
  const file = path.resolve(gateway.config.dataDir, 'dev-account.json');
  try {
    const saved = JSON.parse(readFileSync(file, 'utf8')) as { api_key: string };
    const lookupId = lookupIdOf('sy', saved.api_key);
    const record = lookupId ? await gateway.stores.apiKeys.findByLookupId(lookupId) : null;
    if (record && !record.revoked_at && sameHash(hashSecret(saved.api_key), record.hash)) return saved.api_key;
  } catch {
    // No saved key yet, or its Redis was wiped: make a new one.
  }
  const account = await gateway.stores.accounts.create({ name: 'dev', credits: 1000 });
  const { key } = await gateway.services.auth.createKey(account.id, 'dev');
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, JSON.stringify({ account_id: account.id, api_key: key }, null, 2), { mode: 0o600 });
  return key;
}

async function dev(env: NodeJS.ProcessEnv): Promise<void> {
  // The private tier end to end: a local TEST verifier the gateway trusts, unless one is configured.
  let attestationKeyFile: string | undefined;
  if (!env.ATTESTATION_JWKS) {
    const { DEV_VERIFIER_ISSUER, devVerifier } = await import('./dev/dev-attestation.js');
    const verifier = await devVerifier(loadConfig(env).dataDir);
    attestationKeyFile = verifier.keyFile;
    env = { ...env, ATTESTATION_JWKS: verifier.jwksFile, ATTESTATION_ISSUER: env.ATTESTATION_ISSUER || DEV_VERIFIER_ISSUER };
  }
  // The queue board on: a dev admin token unless one is configured (printed below).
  let devAdmin: ReturnType<typeof devAdminToken> | undefined;
  if (!env.ADMIN_TOKEN) {
    devAdmin = devAdminToken(loadConfig(env).dataDir);
    env = { ...env, ADMIN_TOKEN: devAdmin.token };
  }
  let config = loadConfig(env);
  const localPorts = config.outbound.devLocalPorts;
  const localWarning = localPorts.length
    ? `UNSAFE OUTSIDE DEVELOPMENT: outbound calls (tools, webhooks) may use plain http and reach loopback on port${localPorts.length > 1 ? 's' : ''} ${localPorts.join(', ')} (--allow-local / DEV_ALLOW_LOCAL_PORTS); serve refuses this setting`
    : '';
  if (localWarning) console.error(`switchyard dev: ${localWarning}`);
  let redisChild: ChildProcess | undefined;
  if (config.redisUrlDefaulted && !(await redisAnswers(config.redisUrl))) {
    redisChild = await startLocalRedis(config.dataDir);
    console.error(`started redis-server with its data in ${path.resolve(config.dataDir, 'redis')}`);
    config = loadConfig(env);
  }
  const { demoDelayMs } = config;
  let fleet: { stop(): Promise<void> } | undefined;
  await serve(config, {
    beforeStop: async () => fleet?.stop(),
    cleanup: () => redisChild?.kill(),
    onReady: async (gateway, url) => {
    const key = await devKey(gateway);
    fleet = await startDevFleet(gateway, url, demoDelayMs, attestationKeyFile);
    const att = gateway.config.attestation;
    const privateDemo = attestationKeyFile
      ? `
A private demo worker attests with TEST evidence from a local verifier key (${shortPath(attestationKeyFile)});
it proves nothing about this machine, but shows the whole private flow. Submit a private job:
  curl -s -X POST ${url}/v1/jobs -H "Authorization: Bearer ${key}" -H "Content-Type: application/json" \\
    -d '{"kind":"inference:image:generate","confidentiality":"private","input":{"prompt":"a sealed letter"}}'
and once it has succeeded, check its attestation, receipt and artifacts yourself:
  npx switchyard verify <run_id> --jwks ${att.jwks} --issuer ${att.issuer} --gateway ${url} --key ${key}
`
      : '';
    console.log(`
Switchyard is running at ${url}
A demo worker serves all 11 kinds (trusted tier, 4 slots, about ${demoDelayMs} ms a job).

  API key:  ${key}

Submit a job:
  curl -s -X POST ${url}/v1/jobs -H "Authorization: Bearer ${key}" -H "Content-Type: application/json" \\
    -d '{"kind":"inference:image:generate","input":{"prompt":"a lighthouse at dusk"}}'

Then poll it:  curl -s ${url}/v1/jobs/<run_id> -H "Authorization: Bearer ${key}"
(output.urls has the image; open it in a browser.)

Or with the switchyard command, from another shell:
  export SWITCHYARD_URL=${url} SWITCHYARD_API_KEY=${key}
  npx switchyard run inference:image:generate --input '{"prompt":"a lighthouse at dusk"}' --wait

Queue board (Bull Board, read-only): ${url}/admin/queues
  log in as user admin with password ${devAdmin ? `${devAdmin.token}  (the dev admin token, kept in ${shortPath(devAdmin.file)})` : 'your ADMIN_TOKEN'}
${privateDemo}${localWarning ? `\n!! ${localWarning}\n` : ''}API description: ${url}/v1/openapi.json
`);
    },
  });
}

export async function main(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  // `run` is a caller of the API with its own options (api/main/commands/run.ts): no server code runs.
  if (argv[0] === 'run') return (await import('./commands/run.js')).runCommand(argv.slice(1), env);
  if (argv[0] === 'verify') return (await import('./commands/verify.js')).verifyCommand(argv.slice(1), env);
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: {
      name: { type: 'string' },
      credits: { type: 'string' },
      account: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
      // worker
      gateway: { type: 'string' },
      token: { type: 'string' },
      kinds: { type: 'string' },
      tier: { type: 'string' },
      slots: { type: 'string' },
      engine: { type: 'string' },
      'demo-delay-ms': { type: 'string' },
      models: { type: 'string' },
      'attestation-key': { type: 'string' },
      // dev
      'allow-local': { type: 'string' },
    },
  });
  const command = positionals.join(' ');
  if (values['allow-local'] !== undefined && command !== 'dev') throw new UsageError('--allow-local is for dev only');
  if (values.help || command === '' || command === 'help') {
    console.log(USAGE);
    return 0;
  }
  switch (command) {
    case 'serve': {
      const config = loadConfig(env);
      // A dev-only hole in the SSRF guard must never reach production by a leftover variable.
      if (config.outbound.devLocalPorts.length) throw new ConfigError(['DEV_ALLOW_LOCAL_PORTS is for `npm run dev` only: serve never lets outbound calls use plain http or reach loopback (use OUTBOUND_ALLOW_CIDRS, OUTBOUND_ALLOWED_PORTS and OUTBOUND_CA_FILE for internal https receivers)']);
      await serve(config);
      return -1;
    }
    case 'dev':
      await dev(values['allow-local'] === undefined ? env : { ...env, DEV_ALLOW_LOCAL_PORTS: values['allow-local'] });
      return -1;
    case 'accounts create': {
      if (!values.name) throw new UsageError('accounts create needs --name');
      const credits = values.credits === undefined ? 0 : Number(values.credits);
      if (!Number.isSafeInteger(credits) || credits < 0) throw new UsageError('--credits must be a whole number >= 0');
      const out = await withStores(loadConfig(env), async (stores, auth) => {
        const account = await stores.accounts.create({ name: values.name!, credits });
        const { key } = await auth.createKey(account.id, 'initial');
        return { account: { id: account.id, name: account.name, credits: account.credits }, api_key: key };
      });
      console.log(JSON.stringify(out, null, 2));
      return 0;
    }
    case 'keys create': {
      if (!values.account) throw new UsageError('keys create needs --account');
      const out = await withStores(loadConfig(env), async (stores, auth) => {
        if (!(await stores.accounts.get(values.account!))) throw new UsageError(`no account ${values.account}`);
        const { record, key } = await auth.createKey(values.account!, values.name ?? null);
        return { id: record.id, key, prefix: record.prefix, created_at: record.created_at };
      });
      console.log(JSON.stringify(out, null, 2));
      return 0;
    }
    case 'worker':
      return worker(values, env);
    default:
      throw new UsageError(`unknown command "${command}"`);
  }
}

class UsageError extends Error {}

interface WorkerFlags {
  gateway?: string;
  token?: string;
  kinds?: string;
  tier?: string;
  slots?: string;
  engine?: string;
  'demo-delay-ms'?: string;
  models?: string;
  'attestation-key'?: string;
}

/** `--attestation-key`: TEST evidence signed by a local verifier key, said plainly on stderr. */
async function testAttestation(file: string) {
  const { readVerifierKey, testEvidenceSource } = await import('./dev/dev-attestation.js');
  let key;
  try {
    key = readVerifierKey(file);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const issuer = key.iss ?? 'https://nras.attestation.nvidia.com';
  console.error(`switchyard worker: presenting TEST attestation evidence signed by the local key ${key.kid} (issuer ${issuer}); it proves nothing about this machine's hardware`);
  return { evidence: await testEvidenceSource(key, issuer) };
}

/** `switchyard worker`: an SDK worker with a built-in engine, until SIGTERM/SIGINT. */
async function worker(flags: WorkerFlags, env: NodeJS.ProcessEnv): Promise<number> {
  const { KIND_NAMES } = await import('../../models/kinds.js');
  const { SwitchyardWorker, WorkerRefusedError, consoleLogger, workerSocketUrl } = await import('../../sdk/worker/index.js');
  if (!flags.gateway) throw new UsageError('worker needs --gateway URL (the gateway\'s http(s):// address)');
  try {
    workerSocketUrl(flags.gateway);
    if (!/^https?:$/.test(new URL(flags.gateway).protocol)) throw new Error('not http');
  } catch {
    throw new UsageError(`--gateway must be an http:// or https:// URL, not ${JSON.stringify(flags.gateway)}`);
  }
  const token = flags.token ?? env.SWITCHYARD_WORKER_TOKEN;
  if (!token) throw new UsageError('worker needs --token swt_... (or SWITCHYARD_WORKER_TOKEN)');
  if (!/^swt_\S+$/.test(token)) throw new UsageError('--token must be a worker token (swt_...), from POST /v1/admin/operators or POST /v1/account/worker-tokens');
  if (!flags.kinds) throw new UsageError('worker needs --kinds: a comma-separated list of kinds, or all');
  const kinds = [...new Set(flags.kinds.split(',').map((k) => k.trim()).filter(Boolean))];
  if (kinds.length === 0) throw new UsageError('--kinds is empty');
  if (kinds.includes('all') && kinds.length > 1) throw new UsageError('--kinds all cannot be combined with other kinds');
  const unknown = kinds.filter((k) => k !== 'all' && !KIND_NAMES.includes(k));
  if (unknown.length) throw new UsageError(`unknown kind${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')}; known kinds: ${KIND_NAMES.join(', ')}`);
  const tier = flags.tier ?? 'open';
  if (tier !== 'open' && tier !== 'trusted' && tier !== 'private') throw new UsageError('--tier must be open, trusted or private');
  const slots = flags.slots === undefined ? 1 : Number(flags.slots);
  if (!Number.isInteger(slots) || slots < 1 || slots > 64) throw new UsageError('--slots must be a whole number from 1 to 64');
  const engineName = flags.engine ?? 'demo';
  if (engineName !== 'demo') throw new UsageError(`unknown engine ${JSON.stringify(engineName)}; available: demo`);
  const delayMs = flags['demo-delay-ms'] === undefined ? 1000 : Number(flags['demo-delay-ms']);
  if (!Number.isSafeInteger(delayMs) || delayMs < 0) throw new UsageError('--demo-delay-ms must be a whole number of milliseconds >= 0');
  const models = flags.models === undefined ? ['demo-llm'] : [...new Set(flags.models.split(',').map((m) => m.trim()).filter(Boolean))];
  if (models.length === 0) throw new UsageError('--models is empty: name at least one model, e.g. --models demo-llm');
  if ((tier === 'private') !== (flags['attestation-key'] !== undefined)) throw new UsageError('--tier private and --attestation-key go together: a private worker must attest');
  const attestation = flags['attestation-key'] === undefined ? undefined : await testAttestation(flags['attestation-key']);

  const { createDemoEngine } = await import('../../sdk/engines/demo/index.js');
  const levels = ['debug', 'info', 'warn', 'error', 'silent'] as const;
  const wanted = env.LOG_LEVEL === 'trace' ? 'debug' : env.LOG_LEVEL === 'fatal' ? 'error' : env.LOG_LEVEL;
  const level = levels.find((l) => l === wanted) ?? 'info';
  const w = new SwitchyardWorker({
    gateway: flags.gateway,
    token,
    kinds: kinds[0] === 'all' ? 'all' : kinds,
    tier,
    slots,
    handler: createDemoEngine({ delayMs }),
    software: { name: 'switchyard-demo-engine', engine: engineName, models },
    logger: consoleLogger(level),
    ...(attestation ? { attestation } : {}),
  });
  let signals = 0;
  const onSignal = (signal: string) => {
    signals++;
    if (signals === 1) console.error(`switchyard worker: ${signal}: finishing running jobs, then exiting (send it again to abort them)`);
    void w.stop({ timeoutMs: signals === 1 ? 30_000 : 0 });
  };
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  process.on('SIGINT', () => onSignal('SIGINT'));
  // Rejects (exit 1) with the gateway's own message when it refuses the token, tier or kinds.
  await w.start().catch((err: unknown) => {
    if (signals > 0 && !(err instanceof WorkerRefusedError)) return; // stopped while still connecting
    throw err;
  });
  await w.wait();
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exit(code);
  },
  (err) => {
    if (err instanceof ConfigError || err instanceof UsageError) {
      console.error(`switchyard: ${err.message}`);
      if (err instanceof UsageError) console.error(`\n${USAGE}`);
    } else if ((err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      console.error(`switchyard: ${(err as Error).message}\n\n${USAGE}`);
    } else {
      console.error(`switchyard: ${(err as Error).message ?? err}`);
    }
    process.exit(err instanceof UsageError || err instanceof ConfigError ? 2 : 1);
  },
);
