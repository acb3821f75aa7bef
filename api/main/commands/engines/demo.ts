import { UsageError } from '../../usage-error.js';
import { stringFlag, type EngineFlags, type WorkerEngine } from './worker-engine.js';

const LLM_KIND = 'inference:llm:text-generate';
const IMAGE_KIND = 'inference:image:generate';

/**
 * The demo ranked models a worker can serve one rank of (docs/ranks.md): their kind and how many
 * ranks they split into (demo-ranked-llm's 6 layers: 2 to 6; demo-ranked-image: 2). Written here
 * rather than read from sdk/engines/demo so that parsing the flags loads no model code.
 */
const RANKED: Record<string, { kind: string; min: number; max: number }> = {
  'demo-ranked-llm': { kind: LLM_KIND, min: 2, max: 6 },
  'demo-ranked-image': { kind: IMAGE_KIND, min: 2, max: 2 },
};

interface RankFlag {
  model: string;
  kind: string;
  index: number;
  count: number;
}

/** `--rank i/n` and `--rank-model M`: the rank this worker serves; undefined without --rank. */
function rankFlag(flags: EngineFlags): RankFlag | undefined {
  const given = stringFlag(flags, 'rank');
  const named = stringFlag(flags, 'rank-model');
  if (given === undefined) {
    if (named !== undefined) throw new UsageError('--rank-model goes with --rank i/n');
    return undefined;
  }
  const model = named ?? 'demo-ranked-llm';
  const spec = RANKED[model];
  if (!spec) throw new UsageError(`--rank-model must be ${Object.keys(RANKED).join(' or ')}, not ${JSON.stringify(model)}`);
  const m = /^(\d{1,2})\/(\d{1,2})$/.exec(given);
  if (!m) throw new UsageError(`--rank must be i/n, rank i (from 0) of n ranks, e.g. --rank 0/3; not ${JSON.stringify(given)}`);
  const [index, count] = [Number(m[1]), Number(m[2])];
  if (count < spec.min || count > spec.max) throw new UsageError(`--rank ${given}: ${model} is served in ${spec.min === spec.max ? spec.min : `${spec.min} to ${spec.max}`} ranks`);
  if (index >= count) throw new UsageError(`--rank ${given}: the ranks of ${count} are 0 to ${count - 1}`);
  return { model, kind: spec.kind, index, count };
}

/**
 * `--engine demo`: every kind, made up. `--models a,b` advertises those models for each of its
 * kinds (jobs naming them are routed to it); without it, `demo-llm` for the llm kind. `--rank i/n`
 * makes it a rank worker of a demo ranked model instead (docs/ranks.md).
 */
export const demoEngine: WorkerEngine = {
  name: 'demo',
  flags: { 'demo-delay-ms': { type: 'string' }, rank: { type: 'string' }, 'rank-model': { type: 'string' } },
  usage: `worker --gateway URL --token T --kinds k1,k2|all [--tier open|trusted|private] [--slots N]
         [--engine demo] [--demo-delay-ms N] [--models m1,m2] [--rank i/n [--rank-model M]]
         [--attestation-key FILE] [--identity ID]
                                         run a worker that connects to a gateway and runs its jobs with
                                         an engine (defaults: tier open, 1 slot, engine demo, 1000 ms);
                                         --models: the models it serves for each of its kinds, listed
                                         in /v1/capabilities (default for the demo engine: demo-llm for
                                         the llm kind); --rank i/n: serve rank i (from 0) of n of a
                                         demo ranked model instead (docs/ranks.md): --rank-model
                                         demo-ranked-llm (the default; n from 2 to 6, kind
                                         inference:llm:text-generate) or demo-ranked-image (n = 2,
                                         kind inference:image:generate); --kinds defaults to the
                                         model's kind; the token may also come from
                                         SWITCHYARD_WORKER_TOKEN; stops gracefully on SIGTERM/SIGINT
                                         (a second signal aborts running jobs); --tier private needs
                                         --attestation-key: a local verifier's ES384 private JWK (kid,
                                         optional iss) that signs TEST evidence, which proves nothing
                                         about the hardware (docs/confidentiality.md); --identity: the
                                         worker's name across reconnections (default: a random one per
                                         process), which retires its old connection when it registers
                                         again (docs/worker-protocol.md)`,
  kindsFor(flags) {
    const rank = rankFlag(flags);
    return rank ? [rank.kind] : undefined;
  },
  async create({ flags, kinds, models: ids }) {
    const delay = stringFlag(flags, 'demo-delay-ms');
    const delayMs = delay === undefined ? 1000 : Number(delay);
    if (!Number.isSafeInteger(delayMs) || delayMs < 0) throw new UsageError('--demo-delay-ms must be a whole number of milliseconds >= 0');
    const rank = rankFlag(flags);
    if (rank && !kinds.includes(rank.kind)) throw new UsageError(`--rank serves ${rank.model}, a model of ${rank.kind}: add that kind to --kinds, or leave --kinds out`);
    if (rank && ids) throw new UsageError('--rank and --models do not go together: a rank worker advertises its rank of --rank-model only');
    const { createDemoEngine, DEMO_LLM_MODEL } = await import('../../../../sdk/engines/demo/index.js');
    const models = rank
      ? { [rank.kind]: [{ id: rank.model, rank: { index: rank.index, count: rank.count } }] }
      : ids
        ? Object.fromEntries(kinds.map((k) => [k, ids.map((id) => ({ id }))]))
        : kinds.includes(LLM_KIND)
          ? { [LLM_KIND]: [DEMO_LLM_MODEL] }
          : {};
    return { handler: createDemoEngine({ delayMs }), models, software: { name: 'switchyard-demo-engine', engine: 'demo' } };
  },
};
