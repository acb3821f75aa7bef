import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { generateWhole } from '../sdk/engines/demo/ranked-llm.js';
import { CURL, requireProgram } from './helpers/optional-program.js';
import { TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';

/** The two shell blocks of the README's "One model split over three workers": start the workers, then submit. */
function readmeDemo(): [string, string] {
  const readme = readFileSync('README.md', 'utf8');
  const section = readme.slice(readme.indexOf('### One model split over three workers'));
  const blocks = [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]);
  assert.ok(blocks.length >= 2, 'the README has the three-rank demo');
  return [blocks[0], blocks[1]];
}

/** Runs a shell script; resolves with its exit code and output. */
function bash(script: string, env: NodeJS.ProcessEnv): { done: Promise<{ code: number | null; stdout: string; stderr: string }>; kill(): void } {
  const child = spawn('bash', ['-c', script], { env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  const done = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => child.on('exit', (code) => resolve({ code, stdout, stderr })));
  // The whole process group: bash and the workers it started in the background.
  return { done, kill: () => process.kill(-child.pid!, 'SIGTERM') };
}

/**
 * The README's three-rank demo (docs/ranks.md), run as written against a real gateway: three
 * `switchyard worker --rank i/3` processes and `switchyard run --wait --json`, whose text must
 * be the model run whole, byte for byte, and the words the README promises.
 */
describe('README: the three-rank demo', function () {
  this.timeout(120_000);
  const prefix = uniquePrefix('ranks-readme');
  let gw: TestGateway;

  before(async () => {
    gw = await new TestGateway(prefix).start();
  });
  after(async () => {
    await gw.stop();
    await cleanupPrefix(prefix);
  });

  it('three switchyard worker --rank processes give the text of the model run whole', async function () {
    const curl = requireProgram(this, CURL);
    const { key } = await gw.account(1000);
    const [startWorkers, submit] = readmeDemo();
    const env = { ...process.env, SWITCHYARD_URL: gw.url, SWITCHYARD_API_KEY: key, PATH: `${path.dirname(curl)}:${path.resolve('node_modules/.bin')}:${process.env.PATH}` };
    // The first block leaves the workers running in the background; the shell waits for them.
    const workers = bash(`set -e\n${startWorkers}\nwait\n`, env);
    try {
      await until('the three ranks form a pipeline', async () => {
        const caps = await gw.request('GET', '/v1/capabilities', { key });
        const llm = caps.body.kinds.find((k: any) => k.kind === 'inference:llm:text-generate');
        return llm?.models.find((m: any) => m.id === 'demo-ranked-llm')?.pipelines?.open >= 1;
      }, 30_000);
      const run = await bash(`set -e\n${submit}`, env).done;
      assert.equal(run.code, 0, `the run failed: ${run.stderr}`);
      let job;
      try {
        job = JSON.parse(run.stdout);
      } catch {
        assert.fail(`not the job's JSON: ${run.stdout}\nstderr: ${run.stderr}`);
      }
      assert.equal(job.status, 'succeeded', run.stdout);
      const whole = generateWhole('hello world', 12);
      assert.equal(job.output.text, whole.text);
      assert.ok(readFileSync('README.md', 'utf8').includes(`The run's \`output.text\` is \`${whole.text}\``), 'the README shows the text the run gives');
    } finally {
      workers.kill();
      await workers.done;
    }
  });
});
