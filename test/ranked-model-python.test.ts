import assert from 'node:assert/strict';
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import path from 'node:path';
import { createInterface, type Interface } from 'node:readline';
import { encodeFrame, FRAME_HEADER_BYTES, RankedFrameError } from '../sdk/engines/demo/ranked-frames.js';
import { imageWhole, RankedImageStage } from '../sdk/engines/demo/ranked-image.js';
import { type Forward, generateSplitWith, generateWhole, promptFrame, RankedLlmStage } from '../sdk/engines/demo/ranked-llm.js';
import { tokenize } from '../sdk/engines/demo/ranked-vocab.js';
import { PYTHON, requireProgram } from './helpers/optional-program.js';

const ROOT = path.resolve(import.meta.dirname, '..');

/**
 * The Python twins of the demo ranked models (sdk/python/worker/switchyard_worker/ranked_*.py)
 * against the TypeScript ones: a gateway will mix ranks of Python and TypeScript workers in one
 * pipeline, so here Python ranks sit between TypeScript ranks (test/helpers/ranked-stage-server.py
 * serves them over a pipe) and the output must be the bytes the TypeScript model gives whole.
 */
class PythonStages {
  private readonly child: ChildProcessWithoutNullStreams;
  private readonly lines: Interface;
  private readonly waiting: Array<(line: string) => void> = [];
  private stderr = '';

  constructor(python: string) {
    this.child = spawn(python, [path.join(ROOT, 'test/helpers/ranked-stage-server.py')], { cwd: ROOT, env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' } });
    this.child.stderr.on('data', (d) => (this.stderr += d));
    this.lines = createInterface({ input: this.child.stdout });
    this.lines.on('line', (line) => this.waiting.shift()?.(line));
    this.child.on('exit', (code) => {
      for (const w of this.waiting.splice(0)) w(JSON.stringify({ exit: code, stderr: this.stderr }));
    });
  }

  /** One request, one answer: requests are answered in order. */
  async call(req: Record<string, unknown>): Promise<Record<string, any>> {
    const line = await new Promise<string>((resolve) => {
      this.waiting.push(resolve);
      this.child.stdin.write(`${JSON.stringify(req)}\n`);
    });
    const answer = JSON.parse(line);
    if ('exit' in answer) throw new Error(`the Python stage server exited (${answer.exit}):\n${answer.stderr}`);
    return answer;
  }

  /** A Python rank as a pipeline forward; its errors come back as RankedFrameErrors with Python's message. */
  forward(stage: string, model: 'llm' | 'image', rank: number, ranks: number): Forward {
    return async (frame) => {
      const answer = await this.call({ op: 'forward', stage, model, rank, ranks, frame: frame.toString('base64') });
      if (answer.error) throw new RankedFrameError(answer.error);
      return Buffer.from(answer.frame, 'base64');
    };
  }

  async close(): Promise<void> {
    this.child.stdin.end();
    if (this.child.exitCode === null) await new Promise((r) => this.child.once('exit', r));
  }
}

const PROMPTS = ['hello world', 'in cat', 'Tell me a story about a cat', '', 'café 42, \ud800 ÉCOLE'];

describe('demo ranked models: Python and TypeScript ranks mixed in one pipeline', function () {
  this.timeout(120_000);
  let py: PythonStages;
  let runs = 0;

  before(function () {
    py = new PythonStages(requireProgram(this, PYTHON));
  });
  after(async () => {
    await py?.close();
  });

  it('Python tokenizes, generates and draws whole exactly as TypeScript does', async () => {
    for (const prompt of PROMPTS) {
      assert.deepEqual((await py.call({ op: 'tokenize', prompt })).ids, tokenize(prompt), JSON.stringify(prompt));
      assert.deepEqual(await py.call({ op: 'whole', model: 'llm', prompt, max_tokens: 40 }), { ...generateWhole(prompt, 40) }, JSON.stringify(prompt));
      const png = Buffer.from((await py.call({ op: 'whole', model: 'image', prompt })).png, 'base64');
      assert.ok(png.equals(imageWhole(prompt)), `the PNGs of ${JSON.stringify(prompt)} differ`);
    }
  });

  it('demo-ranked-llm over mixed ranks (ts|py for each rank) gives the bytes of the TypeScript model run whole', async () => {
    const layouts = ['py', 'ts py', 'py ts', 'ts py ts', 'py ts py', 'py py ts ts', 'ts py ts py ts py', 'py ts py ts py ts'];
    for (const layout of layouts) {
      const langs = layout.split(' ');
      for (const prompt of PROMPTS) {
        const run = ++runs;
        const forwards = langs.map((lang, rank): Forward => {
          if (lang === 'py') return py.forward(`llm-${run}-${rank}`, 'llm', rank, langs.length);
          const stage = new RankedLlmStage(rank, langs.length);
          return (frame) => stage.forward(frame);
        });
        const split = await generateSplitWith(prompt, 24, forwards);
        assert.deepEqual(Buffer.from(JSON.stringify(split)), Buffer.from(JSON.stringify(generateWhole(prompt, 24))), `${layout}: ${JSON.stringify(prompt)}`);
      }
    }
  });

  it('demo-ranked-image over mixed ranks writes the PNG of the TypeScript model run whole', async () => {
    for (const prompt of PROMPTS) {
      const run = ++runs;
      const frame = promptFrame(tokenize(prompt), 'demo-ranked-image');
      const ts = (rank: number): Forward => (f) => new RankedImageStage(rank).forward(f);
      const pyRank = (rank: number) => py.forward(`image-${run}-${rank}`, 'image', rank, 2);
      for (const [first, second] of [[ts(0), pyRank(1)], [pyRank(0), ts(1)]]) {
        const png = Buffer.from(await second(Buffer.from(await first(frame))));
        assert.ok(png.equals(imageWhole(prompt)), `the mixed pipeline's PNG of ${JSON.stringify(prompt)} differs`);
      }
    }
  });

  it('Python refuses the malformed frames TypeScript refuses, with the same message', async () => {
    const acts = new RankedLlmStage(0, 3).forward(promptFrame([1, 2, 3]));
    const edit = (from: Buffer, fn: (b: Buffer) => void) => {
      const b = Buffer.from(from);
      fn(b);
      return b;
    };
    const cases: Array<[string, number, Buffer]> = [
      ['llm', 1, acts.subarray(0, 10)],
      ['llm', 1, edit(acts, (b) => b.write('XXXX', 0))],
      ['llm', 1, edit(acts, (b) => (b[4] = 2))],
      ['llm', 1, edit(acts, (b) => (b[6] = 7))],
      ['llm', 1, edit(acts, (b) => (b[7] = 1))],
      ['llm', 1, acts.subarray(0, acts.length - 4)],
      ['llm', 1, edit(acts, (b) => b.writeUInt32LE(1 << 20, 12))],
      ['llm', 1, edit(acts, (b) => b.writeInt32LE(-5000, FRAME_HEADER_BYTES + 8))],
      ['llm', 1, promptFrame([1])],
      ['llm', 2, encodeFrame({ type: 'activations', model: 'demo-ranked-llm', step: 0, values: new Int32Array(63) })],
      ['llm', 0, promptFrame([1, 200])],
      ['llm', 0, encodeFrame({ type: 'token', model: 'demo-ranked-llm', step: 0, values: Int32Array.of(5) })],
      ['image', 0, promptFrame([1])],
      ['image', 1, promptFrame([1], 'demo-ranked-image')],
    ];
    for (const [model, rank, frame] of cases) {
      const run = ++runs;
      const tsStage = model === 'llm' ? new RankedLlmStage(rank, 3) : new RankedImageStage(rank);
      const tsError = (() => {
        try {
          tsStage.forward(frame);
        } catch (err) {
          return err as Error;
        }
      })();
      assert.ok(tsError instanceof RankedFrameError, `TypeScript took ${frame.toString('hex').slice(0, 40)}`);
      const answer = await py.call({ op: 'forward', stage: `err-${run}`, model, rank, ranks: model === 'llm' ? 3 : 2, frame: frame.toString('base64') });
      assert.equal(answer.error, tsError.message);
    }
  });
});
