/**
 * What runs a worker with a token: the `switchyard worker` command (api/main/commands/worker.ts:
 * --gateway, --token, --engine, --kinds) and the Python worker SDK's minimal worker
 * (sdk/python/worker/README.md), with this gateway's PUBLIC_URL, the address workers elsewhere
 * reach it by.
 */

/** The engines offered here: those that need no flag of their own (docs/engines.md has the rest). */
export const SIMPLE_ENGINES = [
  { name: 'demo', label: 'demo: placeholder results for every kind, to try the fleet' },
  { name: 'local', label: 'local: espeak-ng, pocketsphinx and ffmpeg on the worker machine' },
] as const;
export type SimpleEngine = (typeof SIMPLE_ENGINES)[number]['name'];

/** A shell word, quoted only when it needs to be. */
const sh = (s: string) => (/^[A-Za-z0-9_@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);

export function workerCommand(gateway: string, token: string, engine: SimpleEngine, kinds: string): string {
  const args = ['npx', 'switchyard', 'worker', '--gateway', gateway, '--token', token, '--engine', engine];
  // The local engine serves the kinds whose program it finds; naming others is an error.
  if (engine === 'demo') args.push('--kinds', kinds || 'all');
  return args.map(sh).join(' ');
}

/** The README's image worker: a handler per kind, each a plain function. */
export function pythonWorker(gateway: string, token: string): string {
  return `# pip install ./sdk/python/worker   (from a checkout of Switchyard; needs only websockets)
from switchyard_worker import Artifact, Worker

worker = Worker(gateway=${JSON.stringify(gateway)}, token=${JSON.stringify(token)})

@worker.handler("inference:image:generate")
def generate(job):
    png = render(job.input["prompt"])  # your model: bytes of a PNG
    return {"files": [Artifact("image.png", png, "image/png")], "width": 512, "height": 512}

worker.run()  # until Ctrl-C or SIGTERM
`;
}
