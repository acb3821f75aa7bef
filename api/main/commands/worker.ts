import { UsageError } from '../usage-error.js';

import { ENGINES, modelList } from './engines/index.js';
import type { EngineFlags } from './engines/worker-engine.js';

/** The flags every engine shares; each engine's own (api/main/commands/engines/) come beside them. */
export interface WorkerFlags extends EngineFlags {
  gateway?: string;
  token?: string;
  kinds?: string;
  tier?: string;
  slots?: string;
  engine?: string;
  models?: string;
  identity?: string;
  'attestation-key'?: string;
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
  const spec = ENGINES.find((e) => e.name === engineName);
  if (!spec) throw new UsageError(`unknown engine ${JSON.stringify(engineName)}; available: ${ENGINES.map((e) => e.name).join(', ')}`);
  for (const other of ENGINES) {
    if (other === spec) continue;
    const given = Object.keys(other.flags).filter((f) => flags[f] !== undefined && !(f in spec.flags));
    if (given.length) throw new UsageError(`${given.map((f) => `--${f}`).join(' and ')} ${given.length > 1 ? 'are' : 'is'} for --engine ${other.name}`);
  }
  const kindsFlag = flags.kinds ?? (spec.kindsFor?.(flags) ?? spec.defaultKinds)?.join(',');
  if (!kindsFlag) throw new UsageError('worker needs --kinds: a comma-separated list of kinds, or all');
  const kinds = [...new Set(kindsFlag.split(',').map((k) => k.trim()).filter(Boolean))];
  if (kinds.length === 0) throw new UsageError('--kinds is empty');
  if (kinds.includes('all') && kinds.length > 1) throw new UsageError('--kinds all cannot be combined with other kinds');
  const unknown = kinds.filter((k) => k !== 'all' && !KIND_NAMES.includes(k));
  if (unknown.length) throw new UsageError(`unknown kind${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')}; known kinds: ${KIND_NAMES.join(', ')}`);
  const served = kinds[0] === 'all' ? [...(spec.onlyKinds ?? KIND_NAMES)] : kinds;
  const foreign = spec.onlyKinds ? served.filter((k) => !spec.onlyKinds!.includes(k)) : [];
  if (foreign.length) throw new UsageError(`--engine ${spec.name} serves ${spec.onlyKinds!.join(', ')} only, not ${foreign.join(', ')}${spec.defaultKinds ? ' (leave --kinds out)' : ''}`);
  const tier = flags.tier ?? 'open';
  if (tier !== 'open' && tier !== 'trusted' && tier !== 'private') throw new UsageError('--tier must be open, trusted or private');
  const slots = flags.slots === undefined ? 1 : Number(flags.slots);
  if (!Number.isInteger(slots) || slots < 1 || slots > 64) throw new UsageError('--slots must be a whole number from 1 to 64');
  if ((tier === 'private') !== (flags['attestation-key'] !== undefined)) throw new UsageError('--tier private and --attestation-key go together: a private worker must attest');
  const { WORKER_IDENTITY_PATTERN } = await import('../../../sdk/protocol/index.js');
  if (flags.identity !== undefined && !new RegExp(WORKER_IDENTITY_PATTERN).test(flags.identity)) throw new UsageError('--identity must be 1-128 letters, digits and ._:- starting with a letter or digit');
  const attestation = flags['attestation-key'] === undefined ? undefined : await testAttestation(flags['attestation-key']);
  const { close, kinds: engineKinds, ...engine } = await spec.create({ flags, env, kinds: served, models: modelList(flags.models) });

  const levels = ['debug', 'info', 'warn', 'error', 'silent'] as const;
  const wanted = env.LOG_LEVEL === 'trace' ? 'debug' : env.LOG_LEVEL === 'fatal' ? 'error' : env.LOG_LEVEL;
  const level = levels.find((l) => l === wanted) ?? 'info';
  const w = new SwitchyardWorker({
    gateway: flags.gateway,
    token,
    kinds: engineKinds ?? (kinds[0] === 'all' && !spec.onlyKinds ? 'all' : served),
    tier,
    slots,
    ...engine,
    ...(flags.identity !== undefined ? { identity: flags.identity } : {}),
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
  await close?.();
  return 0;
}
