import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { REDIS_SERVER, requireProgram } from './helpers/optional-program.js';
import { judgeGrowth, type Sample } from './soak/growth-detector.js';
import { SERIES, seriesFor } from './soak/soak-sampler.js';

/**
 * The soak (test/soak/, docs/reliability.md "Soak"): its growth rule on series whose answer is
 * known, and a short real soak, which must pass and print its figures.
 */

/** A seeded PRNG (mulberry32), so each noisy series is the same on every run. */
function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Samples every 2 s for `seconds`, of `f(t)` plus uniform noise of ±`noise`. */
function series(seconds: number, f: (t: number) => number, noise = 0, seed = 1): Sample[] {
  const rnd = random(seed);
  return Array.from({ length: seconds / 2 + 1 }, (_, i) => ({ t: i * 2, v: f(i * 2) + (rnd() * 2 - 1) * noise }));
}

const MB = 1024 * 1024;
const heapRule = SERIES.find((s) => s.name === 'gateway heap used')!.rule;
const plainRule = { tolerance: 0.1, floor: 0 };

describe('soak', () => {
  describe('growth rule', () => {
    it('passes a flat series with noise, on several seeds', () => {
      for (let seed = 1; seed <= 20; seed++) {
        const v = judgeGrowth(series(600, () => 100 * MB, 5 * MB, seed), plainRule);
        assert.equal(v.grows, false, `seed ${seed}: projected ${v.projected / MB} MB, rise ${v.rise / MB} MB`);
      }
    });

    it("passes a GC sawtooth (the heap's rule, judged by its lower envelope), whatever its phase", () => {
      for (const period of [7, 13, 20, 29]) {
        for (let phase = 0; phase < period; phase += 3) {
          const saw = series(120, (t) => 50 * MB + (((t + phase) % period) / period) * 60 * MB, 2 * MB, period + phase);
          const v = judgeGrowth(saw, heapRule);
          assert.equal(v.grows, false, `period ${period} s, phase ${phase}: projected ${v.projected / MB} MB`);
        }
      }
    });

    it('fails a linear leak, noisy or not, and a leak under a sawtooth', () => {
      assert.equal(judgeGrowth(series(600, (t) => 100 * MB + t * 0.05 * MB), plainRule).grows, true, '3 MB a minute on 100 MB');
      assert.equal(judgeGrowth(series(600, (t) => 100 * MB + t * 0.05 * MB, 5 * MB), plainRule).grows, true, 'the same under noise');
      const leakySaw = series(300, (t) => 50 * MB + ((t % 20) / 20) * 60 * MB + t * 0.2 * MB, 2 * MB);
      assert.equal(judgeGrowth(leakySaw, heapRule).grows, true, '12 MB a minute under a sawtooth of 60 MB');
    });

    it('passes a step that levels off, in the warm-up half or in the judged half', () => {
      const early = series(600, (t) => (t < 240 ? 100 : 130) * MB, 2 * MB);
      assert.equal(judgeGrowth(early, plainRule).grows, false, 'a step at 40% of the run');
      const late = series(600, (t) => (100 + 30 * Math.min(1, Math.max(0, (t - 300) / 30))) * MB, 2 * MB);
      const v = judgeGrowth(late, plainRule);
      assert.ok(v.projected > v.limit, 'the late ramp does tilt the line');
      assert.equal(v.grows, false, 'but the last quarter is level with the third');
    });

    it('leaves growth under the floor alone', () => {
      const slowDrift = series(120, (t) => 0.005 + t * 0.00002);
      assert.equal(judgeGrowth(slowDrift, { tolerance: 0.1, floor: 0.02 }).grows, false, 'event-loop delay drifting by 2.4 ms');
      assert.equal(judgeGrowth(slowDrift, { tolerance: 0.1 }).grows, true, 'the same drift with no floor');
    });
  });

  it("judges a short run's RSS by report only and its heap with twice the floor; a long run by the rules as written", () => {
    const spec = (specs: typeof SERIES, name: string) => specs.find((s) => s.name === name)!;
    const short = seriesFor(1);
    assert.equal(spec(short, 'gateway RSS').reportOnly, true);
    assert.equal(spec(short, 'gateway heap used').rule.floor, 2 * spec(SERIES, 'gateway heap used').rule.floor!);
    assert.equal(spec(short, 'Redis keys - kept by design'), spec(SERIES, 'Redis keys - kept by design'), 'the rest as written');
    assert.equal(seriesFor(30), SERIES);
  });

  it('a one-minute soak of the real gateway passes and prints its figures', async function () {
    this.timeout(240_000);
    // The soak runs its own redis-server (test/soak/soak-environment.ts says why).
    requireProgram(this, REDIS_SERVER);
    const child = spawn(process.execPath, ['--import', 'tsx', 'test/soak/run.ts', '--minutes', '1'], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString('utf8')));
    const [code] = await once(child, 'exit');
    console.log(out);
    for (const s of SERIES) assert.match(out, new RegExp(`\\| ${s.name.replace(/[-_]/g, '.')} `), `the figures of ${s.name}`);
    assert.match(out, /\n0 errors|; 0 errors/, 'the load met no error');
    assert.match(out, /\nPASS\n?$/);
    assert.equal(code, 0);
  });
});
