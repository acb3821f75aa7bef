import { UsageError } from '../../usage-error.js';
import { stringFlag, type WorkerEngine } from './worker-engine.js';

const LLM_KIND = 'inference:llm:text-generate';

/**
 * `--engine demo`: every kind, made up. `--models a,b` advertises those models for each of its
 * kinds (jobs naming them are routed to it); without it, `demo-llm` for the llm kind.
 */
export const demoEngine: WorkerEngine = {
  name: 'demo',
  flags: { 'demo-delay-ms': { type: 'string' } },
  usage: `worker --gateway URL --token T --kinds k1,k2|all [--tier open|trusted|private] [--slots N]
         [--engine demo] [--demo-delay-ms N] [--models m1,m2] [--attestation-key FILE] [--identity ID]
                                         run a worker that connects to a gateway and runs its jobs with
                                         an engine (defaults: tier open, 1 slot, engine demo, 1000 ms);
                                         --models: the models it serves for each of its kinds, listed
                                         in /v1/capabilities (default for the demo engine: demo-llm for
                                         the llm kind); the token may also come from
                                         SWITCHYARD_WORKER_TOKEN; stops gracefully on SIGTERM/SIGINT
                                         (a second signal aborts running jobs); --tier private needs
                                         --attestation-key: a local verifier's ES384 private JWK (kid,
                                         optional iss) that signs TEST evidence, which proves nothing
                                         about the hardware (docs/confidentiality.md); --identity: the
                                         worker's name across reconnections (default: a random one per
                                         process), which retires its old connection when it registers
                                         again (docs/worker-protocol.md)`,
  async create({ flags, kinds, models: ids }) {
    const delay = stringFlag(flags, 'demo-delay-ms');
    const delayMs = delay === undefined ? 1000 : Number(delay);
    if (!Number.isSafeInteger(delayMs) || delayMs < 0) throw new UsageError('--demo-delay-ms must be a whole number of milliseconds >= 0');
    const { createDemoEngine, DEMO_LLM_MODEL } = await import('../../../../sdk/engines/demo/index.js');
    const models = ids ? Object.fromEntries(kinds.map((k) => [k, ids.map((id) => ({ id }))])) : kinds.includes(LLM_KIND) ? { [LLM_KIND]: [DEMO_LLM_MODEL] } : {};
    return { handler: createDemoEngine({ delayMs }), models, software: { name: 'switchyard-demo-engine', engine: 'demo' } };
  },
};
