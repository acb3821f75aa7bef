import { createDemoEngine, DEMO_LLM_MODEL } from '../../../sdk/engines/demo/index.js';
import { createLocalEngine, type LocalEngine } from '../../../sdk/engines/local/index.js';
import { SwitchyardWorker, consoleLogger } from '../../../sdk/worker/index.js';
import { readVerifierKey, testEvidenceSource } from './dev-attestation.js';
import type { Gateway } from '../../composition/gateway.js';
import { issueWorkerToken } from '../../services/fleet/worker-tokens.js';

/** The demo fleet: its workers, stopped together. */
export interface DevFleet {
  workers: SwitchyardWorker[];
  /** The kinds served by real programs of this machine (the local engine), and those it could not. */
  local: Pick<LocalEngine, 'served' | 'missing'>;
  stop(): Promise<void>;
}

/**
 * The demo fleet of `npm run dev`: one trusted worker for every kind, so a job submitted from the
 * quick start finishes with a real, downloadable artifact. The kinds whose program is installed
 * here (espeak-ng, pocketsphinx, ffmpeg) run on the local engine, real speech, transcripts and
 * video; the others on the demo engine.
 * Trusted, so it serves open and trusted jobs. Given the dev verifier's key file, also a
 * private worker that attests with TEST evidence (it proves nothing about hardware; it shows
 * the private flow: attestation, receipts, `switchyard verify`).
 */
export async function startDevFleet(gateway: Gateway, url: string, delayMs: number, attestationKeyFile?: string): Promise<DevFleet> {
  const operator = await gateway.stores.operators.create({ name: 'dev demo fleet', trust: 'trusted' });
  const { token } = await issueWorkerToken(gateway.stores.workerTokens, { type: 'operator', id: operator.id }, 'trusted');
  const local = createLocalEngine();
  const common = {
    gateway: url,
    token,
    kinds: 'all' as const,
    handler: { ...local.handlers, '*': createDemoEngine({ delayMs }) },
    logger: consoleLogger('warn'),
    software: { name: 'switchyard-demo-fleet' },
    // Listed by GET /v1/models: the model OpenAI-compatible clients and bots name.
    models: { 'inference:llm:text-generate': [DEMO_LLM_MODEL] },
  };
  const workers = [new SwitchyardWorker({ ...common, tier: 'trusted', slots: 4 })];
  if (attestationKeyFile) {
    const evidence = await testEvidenceSource(readVerifierKey(attestationKeyFile), gateway.config.attestation.issuer);
    workers.push(new SwitchyardWorker({ ...common, tier: 'private', slots: 2, attestation: { evidence } }));
  }
  await Promise.all(workers.map((w) => w.start()));
  return { workers, local: { served: local.served, missing: local.missing }, stop: async () => void (await Promise.all(workers.map((w) => w.stop()))) };
}
