import { UsageError } from '../usage-error.js';

export interface WorkerFlags {
  gateway?: string;
  token?: string;
  kinds?: string;
  tier?: string;
  slots?: string;
  engine?: string;
  'demo-delay-ms'?: string;
  models?: string;
  'attestation-key'?: string;
  'backend-url'?: string;
  'backend-key'?: string;
}

const LLM_KIND = 'inference:llm:text-generate';
const ENGINES = ['demo', 'openai'];

/** `--models a,b`: the names, trimmed and deduplicated; undefined when the flag is absent. */
function modelList(flag: string | undefined): string[] | undefined {
  if (flag === undefined) return undefined;
  const models = [...new Set(flag.split(',').map((m) => m.trim()).filter(Boolean))];
  if (models.length === 0) throw new UsageError('--models is empty: name at least one model, e.g. --models demo-llm');
  return models;
}

/**
 * `--engine openai`: the llm kind served by an OpenAI-compatible backend, advertising the
 * models named by --models or else those the backend lists. A backend that cannot be asked, or
 * lists none, stops the command here (exit 1), before it connects to the gateway.
 */
async function openAiEngine(flags: WorkerFlags, env: NodeJS.ProcessEnv) {
  const backendUrl = flags['backend-url'];
  if (!backendUrl) throw new UsageError('--engine openai needs --backend-url: the OpenAI base URL of the inference server, e.g. http://127.0.0.1:8000/v1');
  const { createOpenAiEngine } = await import('../../../sdk/engines/openai/index.js');
  let engine;
  try {
    engine = createOpenAiEngine({ backendUrl, apiKey: flags['backend-key'] ?? env.SWITCHYARD_BACKEND_KEY ?? undefined, models: modelList(flags.models) });
  } catch (err) {
    if (err instanceof UsageError) throw err;
    const message = (err as Error).message;
    throw new UsageError(message.startsWith('backendUrl') ? message.replace('backendUrl', '--backend-url') : `--models: ${message}`);
  }
  const models = await engine.listModels().catch((err: Error) => {
    throw new Error(`cannot list the models of the backend at ${backendUrl}: ${err.message}. Start the server, check --backend-url (it ends in /v1) and --backend-key, or name its models with --models`);
  });
  const ids = models.map((m) => m.id);
  console.error(`switchyard worker: serving ${LLM_KIND} with the backend at ${backendUrl}; models: ${ids.join(', ')}`);
  return { handler: engine.handler, models: { [LLM_KIND]: models }, software: { name: 'switchyard-openai-engine', engine: 'openai' } };
}

/** `--attestation-key`: TEST evidence signed by a local verifier key, said plainly on stderr. */
async function testAttestation(file: string) {
  const { readVerifierKey, testEvidenceSource } = await import('../dev/dev-attestation.js');
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

/**
 * `--engine demo`: every kind, made up. `--models a,b` advertises those models for each of its
 * kinds (jobs naming them are routed to it); without it, `demo-llm` for the llm kind.
 */
async function demoEngine(delayMs: number, kinds: string[], ids: string[] | undefined) {
  const { createDemoEngine, DEMO_LLM_MODEL } = await import('../../../sdk/engines/demo/index.js');
  const models = ids ? Object.fromEntries(kinds.map((k) => [k, ids.map((id) => ({ id }))])) : kinds.includes(LLM_KIND) ? { [LLM_KIND]: [DEMO_LLM_MODEL] } : {};
  return { handler: createDemoEngine({ delayMs }), models, software: { name: 'switchyard-demo-engine', engine: 'demo' } };
}

export /** `switchyard worker`: an SDK worker with a built-in engine, until SIGTERM/SIGINT. */
async function worker(flags: WorkerFlags, env: NodeJS.ProcessEnv): Promise<number> {
  const { KIND_NAMES } = await import('../../../models/kinds.js');
  const { SwitchyardWorker, WorkerRefusedError, consoleLogger, workerSocketUrl } = await import('../../../sdk/worker/index.js');
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
  const engineName = flags.engine ?? 'demo';
  if (!ENGINES.includes(engineName)) throw new UsageError(`unknown engine ${JSON.stringify(engineName)}; available: ${ENGINES.join(', ')}`);
  const openai = engineName === 'openai';
  // The openai engine serves one kind, which --kinds may name or leave out.
  const kindsFlag = flags.kinds ?? (openai ? LLM_KIND : undefined);
  if (!kindsFlag) throw new UsageError('worker needs --kinds: a comma-separated list of kinds, or all');
  const kinds = [...new Set(kindsFlag.split(',').map((k) => k.trim()).filter(Boolean))];
  if (kinds.length === 0) throw new UsageError('--kinds is empty');
  if (kinds.includes('all') && kinds.length > 1) throw new UsageError('--kinds all cannot be combined with other kinds');
  const unknown = kinds.filter((k) => k !== 'all' && !KIND_NAMES.includes(k));
  if (unknown.length) throw new UsageError(`unknown kind${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')}; known kinds: ${KIND_NAMES.join(', ')}`);
  if (openai && (kinds.length !== 1 || kinds[0] !== LLM_KIND)) throw new UsageError(`--engine openai serves ${LLM_KIND} only (leave --kinds out)`);
  const tier = flags.tier ?? 'open';
  if (tier !== 'open' && tier !== 'trusted' && tier !== 'private') throw new UsageError('--tier must be open, trusted or private');
  const slots = flags.slots === undefined ? 1 : Number(flags.slots);
  if (!Number.isInteger(slots) || slots < 1 || slots > 64) throw new UsageError('--slots must be a whole number from 1 to 64');
  if (openai && flags['demo-delay-ms'] !== undefined) throw new UsageError('--demo-delay-ms is for --engine demo');
  if (!openai && (flags['backend-url'] !== undefined || flags['backend-key'] !== undefined)) throw new UsageError('--backend-url and --backend-key are for --engine openai');
  const delayMs = flags['demo-delay-ms'] === undefined ? 1000 : Number(flags['demo-delay-ms']);
  if (!Number.isSafeInteger(delayMs) || delayMs < 0) throw new UsageError('--demo-delay-ms must be a whole number of milliseconds >= 0');
  if ((tier === 'private') !== (flags['attestation-key'] !== undefined)) throw new UsageError('--tier private and --attestation-key go together: a private worker must attest');
  const attestation = flags['attestation-key'] === undefined ? undefined : await testAttestation(flags['attestation-key']);
  const served = kinds[0] === 'all' ? [...KIND_NAMES] : kinds;
  const engine = openai ? await openAiEngine(flags, env) : await demoEngine(delayMs, served, modelList(flags.models));

  const levels = ['debug', 'info', 'warn', 'error', 'silent'] as const;
  const wanted = env.LOG_LEVEL === 'trace' ? 'debug' : env.LOG_LEVEL === 'fatal' ? 'error' : env.LOG_LEVEL;
  const level = levels.find((l) => l === wanted) ?? 'info';
  const w = new SwitchyardWorker({
    gateway: flags.gateway,
    token,
    kinds: kinds[0] === 'all' ? 'all' : kinds,
    tier,
    slots,
    ...engine,
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
