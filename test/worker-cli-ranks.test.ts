import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { worker } from '../api/main/commands/worker.js';
import { UsageError } from '../api/main/usage-error.js';
import { imageWhole } from '../sdk/engines/demo/ranked-image.js';
import { generateWhole } from '../sdk/engines/demo/ranked-llm.js';
import { runCliWorker, type CliWorkerTarget } from './helpers/cli-worker.js';
import { until } from './helpers/harness.js';
import { RankRelayGateway, type Frame } from './helpers/rank-relay-gateway.js';

/**
 * `switchyard worker --engine demo --rank i/n [--rank-model M]`: a rank worker of a demo ranked
 * model (docs/ranks.md). Real processes of the compiled CLI against a scripted gateway that
 * relays the pipeline's frames (test/helpers/rank-relay-gateway.ts).
 */

const LLM = 'inference:llm:text-generate';
const IMAGE = 'inference:image:generate';

describe('switchyard worker --engine demo --rank', function () {
  // CLI processes: a second or so each on a loaded machine.
  this.timeout(120_000);
  let gw: RankRelayGateway;
  const env = { ...process.env, LOG_LEVEL: 'warn', SWITCHYARD_WORKER_TOKEN: '' };
  const target = (): CliWorkerTarget => ({ gateway: gw.url, token: 'swt_test', env });

  /** Runs one CLI worker per argument list, all at once, until `whileUp` is done; their exit codes. */
  async function runWorkers(args: string[][], whileUp: () => Promise<void>): Promise<number[]> {
    const codes: number[] = [];
    const nest = async (i: number): Promise<void> => {
      if (i === args.length) return whileUp();
      const { code, stderr } = await runCliWorker(target(), args[i], () => nest(i + 1));
      assert.equal(code, 0, stderr);
      codes.push(code!);
    };
    await nest(0);
    return codes;
  }

  /** The connection index of the worker that registered rank `index` of `model`. */
  const workerOf = (model: string, index: number) => gw.registers.findIndex((r) => Object.values(r?.models ?? {}).some((list) => (list as Frame[]).some((m) => m.id === model && m.rank?.index === index)));

  beforeEach(async () => {
    gw = await new RankRelayGateway().start();
  });
  afterEach(async () => {
    await gw.stop();
  });

  it('three workers, --rank 0/3, 1/3 and 2/3, advertise their ranks of demo-ranked-llm and write the text of the model run whole', async () => {
    await runWorkers([['--rank', '0/3'], ['--rank', '1/3'], ['--rank', '2/3', '--demo-delay-ms', '0']], async () => {
      await gw.workers(3);
      for (let index = 0; index < 3; index++) {
        const register = gw.registers[workerOf('demo-ranked-llm', index)];
        assert.deepEqual(register.kinds, [LLM]);
        assert.deepEqual(register.models, { [LLM]: [{ id: 'demo-ranked-llm', rank: { index, count: 3 } }] });
      }
      const pipeline = gw.pipeline({ kind: LLM, model: 'demo-ranked-llm', input: { prompt: 'hello world', max_tokens: 20, model: 'demo-ranked-llm' }, workers: [0, 1, 2].map((i) => workerOf('demo-ranked-llm', i)) });
      const last = await until('the last rank completes', async () => gw.final(pipeline.ranks[2].frame.lease_id), 60_000);
      assert.equal(last.type, 'complete', JSON.stringify(last));
      assert.equal(last.output.text, generateWhole('hello world', 20).text);
      assert.equal(last.output.finish_reason, 'length');
      await until('every rank completes', async () => pipeline.ranks.every((r) => gw.final(r.frame.lease_id)?.type === 'complete'));
    });
    assert.deepEqual(gw.violations, []);
  });

  it('--rank 0/2 and 1/2 with --rank-model demo-ranked-image serve the image kind and make the PNG of the model run whole', async () => {
    await runWorkers([['--rank', '0/2', '--rank-model', 'demo-ranked-image'], ['--rank', '1/2', '--rank-model', 'demo-ranked-image', '--kinds', `${IMAGE},${LLM}`]], async () => {
      await gw.workers(2);
      const [first, second] = [gw.registers[workerOf('demo-ranked-image', 0)], gw.registers[workerOf('demo-ranked-image', 1)]];
      assert.deepEqual(first.kinds, [IMAGE]);
      // Other kinds named beside it are served as usual, with no model advertised.
      assert.deepEqual(second.kinds, [IMAGE, LLM]);
      assert.deepEqual(second.models, { [IMAGE]: [{ id: 'demo-ranked-image', rank: { index: 1, count: 2 } }] });
      const pipeline = gw.pipeline({ kind: IMAGE, model: 'demo-ranked-image', input: { prompt: 'a lighthouse at night', model: 'demo-ranked-image' }, workers: [workerOf('demo-ranked-image', 0), workerOf('demo-ranked-image', 1)] });
      const leaseId = pipeline.ranks[1].frame.lease_id;
      const last = await until('the last rank completes', async () => gw.final(leaseId), 60_000);
      assert.equal(last.type, 'complete', JSON.stringify(last));
      assert.ok(gw.uploads.get(`${leaseId}/image.png`)?.equals(imageWhole('a lighthouse at night')));
    });
  });

  it('refuses bad --rank and --rank-model values, naming the flag, and --rank with another engine', async () => {
    const base = { gateway: 'http://127.0.0.1:1', token: 'swt_test' };
    const cases: Array<[Record<string, string>, RegExp]> = [
      [{ rank: '1' }, /--rank must be i\/n, rank i \(from 0\) of n ranks, e\.g\. --rank 0\/3; not "1"/],
      [{ rank: 'one/three' }, /--rank must be i\/n/],
      [{ rank: '3/3' }, /--rank 3\/3: the ranks of 3 are 0 to 2/],
      [{ rank: '0/1' }, /--rank 0\/1: demo-ranked-llm is served in 2 to 6 ranks/],
      [{ rank: '0/7' }, /--rank 0\/7: demo-ranked-llm is served in 2 to 6 ranks/],
      [{ rank: '0/3', 'rank-model': 'demo-ranked-image' }, /--rank 0\/3: demo-ranked-image is served in 2 ranks/],
      [{ rank: '0/2', 'rank-model': 'sdxl' }, /--rank-model must be demo-ranked-llm or demo-ranked-image, not "sdxl"/],
      [{ 'rank-model': 'demo-ranked-image', kinds: IMAGE }, /--rank-model goes with --rank i\/n/],
      [{ rank: '0/2', kinds: IMAGE }, /--rank serves demo-ranked-llm, a model of inference:llm:text-generate: add that kind to --kinds/],
      [{ rank: '0/2', models: 'demo-llm' }, /--rank and --models do not go together/],
      [{ rank: '0/2', engine: 'openai', 'backend-url': 'http://127.0.0.1:1/v1' }, /--rank is for --engine demo/],
      [{ 'rank-model': 'demo-ranked-llm', engine: 'command', command: 'gen', kinds: LLM }, /--rank-model is for --engine demo/],
    ];
    for (const [flags, message] of cases) {
      await assert.rejects(worker({ ...base, ...flags }, {}), (err: unknown) => {
        assert.ok(err instanceof UsageError, `${JSON.stringify(flags)}: ${String(err)}`);
        assert.match(err.message, message, JSON.stringify(flags));
        return true;
      });
    }
    // Through the command line: the flag is known to the parser, and a bad value exits 2 with the usage.
    const run = promisify(execFile);
    const result = await run(process.execPath, ['api/bin/switchyard.mjs', 'worker', '--gateway', gw.url, '--token', 'swt_test', '--rank', '5/5'], { env }).then(
      () => ({ code: 0, stderr: '' }),
      (e: { code: number; stderr: string }) => e,
    );
    assert.equal(result.code, 2, result.stderr);
    assert.match(result.stderr, /--rank 5\/5: the ranks of 5 are 0 to 4[\s\S]*--rank i\/n \[--rank-model M\]/);
  });
});
