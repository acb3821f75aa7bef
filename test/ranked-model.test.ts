import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { decodePng } from '../sdk/engines/demo/png.js';
import { decodeFrame, encodeFrame, FRAME_HEADER_BYTES, RankedFrameError } from '../sdk/engines/demo/ranked-frames.js';
import { imageSplit, imageWhole, LATENT_VALUES, RANKED_IMAGE, RankedImageStage } from '../sdk/engines/demo/ranked-image.js';
import { generateSplit, generateWhole, layerRange, pipelineLoop, promptFrame, RANKED_LLM, RankedLlmStage } from '../sdk/engines/demo/ranked-llm.js';
import { detokenize, END_TOKEN, tokenize, VOCAB } from '../sdk/engines/demo/ranked-vocab.js';

/**
 * The demo ranked models of issue 27 (docs/ranks.md, "The demo ranked models"): split into ranks
 * they give exactly what they give whole, their output is pinned, and a frame that is malformed
 * or sent to the wrong rank is refused saying why. The Python twins and mixed pipelines are in
 * ranked-model-python.test.ts.
 */

const PROMPTS = ['hello world', 'in cat', 'Tell me a story about a cat', '', 'The quick brown fox, café 42!'];
const bytesOf = (g: { tokens: number[]; text: string; finish: string }) => Buffer.from(JSON.stringify(g));

/** The tEXt chunks of a PNG, keyword -> text. */
function pngText(png: Buffer): Record<string, string> {
  const out: Record<string, string> = {};
  for (let pos = 8; pos < png.length; ) {
    const length = png.readUInt32BE(pos);
    if (png.toString('latin1', pos + 4, pos + 8) === 'tEXt') {
      const body = png.toString('latin1', pos + 8, pos + 8 + length);
      const nul = body.indexOf('\0');
      out[body.slice(0, nul)] = body.slice(nul + 1);
    }
    pos += 12 + length;
  }
  return out;
}

const refuses = (fn: () => unknown, message: RegExp) => assert.throws(fn, (err: Error) => err instanceof RankedFrameError && message.test(err.message));

describe('demo-ranked-llm', () => {
  it('split into 1 to 6 ranks, gives the bytes it gives whole, stopping on the end token or at max_tokens', () => {
    for (const prompt of PROMPTS) {
      const whole = generateWhole(prompt, 40);
      assert.ok(whole.tokens.length > 0);
      for (const ranks of [1, 2, 3, 4, 5, 6]) assert.deepEqual(bytesOf(generateSplit(prompt, 40, ranks)), bytesOf(whole), `${JSON.stringify(prompt)} over ${ranks} ranks`);
    }
    assert.equal(generateSplit('in cat', 64).finish, 'stop');
    assert.equal(generateSplit('hello world', 64).finish, 'length');
  });

  it('writes the pinned words (greedy, from the seed alone)', () => {
    assert.deepEqual(generateWhole('hello world', 8), { tokens: [121, 65, 11, 89, 63, 62, 63, 72], text: 'here forest at small garden window garden queue', finish: 'length' });
    const stopped = generateWhole('in cat', 64);
    assert.equal(stopped.text, 'fire together always fire house always pink queue it some here queue light slow opens carries pink and');
    assert.deepEqual([stopped.tokens.length, stopped.tokens.at(-1), stopped.finish], [19, END_TOKEN, 'stop']);
    assert.deepEqual(generateWhole('in cat', 3), { tokens: [55, 118, 119], text: 'fire together always', finish: 'length' });
    assert.deepEqual(generateWhole('in cat', 0), { tokens: [], text: '', finish: 'length' });
    assert.throws(() => generateWhole('x', -1), /max_tokens must be a non-negative integer/);
    assert.equal(new RankedLlmStage(0, 1).weightsDigest, '42956a2c50d35efa8a2943796a205677aee40b410d3f824688787b4e6d822353');
    assert.equal(new RankedLlmStage(1, 3).weightsDigest, 'c63d4d8472332d2a0fdd376247436da338a49c1a82fac6d8269f11234cc7cc9a');
  });

  it('tokenizes words by ASCII case-folding and hashes the others into the vocabulary', () => {
    assert.equal(VOCAB.length, 128);
    assert.deepEqual(tokenize('Hello, WORLD! Switchyard café 42 \ud800x'), [124, 125, 2, 99, 100, 75]);
    assert.equal(detokenize(tokenize('the red fox runs')), 'the red fox runs');
    assert.equal(detokenize([4, END_TOKEN]), 'and');
    assert.equal(tokenize('word '.repeat(5000)).length, 4096);
  });

  it('splits the 6 layers contiguously and refuses splits it cannot make', () => {
    assert.deepEqual([0, 1, 2, 3].map((r) => layerRange(r, 4)), [[0, 1], [1, 3], [3, 4], [4, 6]]);
    assert.deepEqual([0, 1, 2].map((r) => layerRange(r, 3)), [[0, 2], [2, 4], [4, 6]]);
    assert.throws(() => new RankedLlmStage(0, 7), /splits into 1 to 6 ranks, not 7/);
    assert.throws(() => new RankedLlmStage(3, 3), /rank 3 is not one of 0\.\.2/);
  });

  it('passes activations between ranks and sends the last rank token frame back to rank 0 as is', () => {
    const stages = [0, 1, 2].map((r) => new RankedLlmStage(r, 3));
    const loop = pipelineLoop('hello world', 3, 3);
    const seen: Array<[number, string, number, number]> = [];
    let lastOut: Buffer | undefined;
    let next = loop.next(new Uint8Array());
    while (!next.done) {
      const { rank, frame } = next.value;
      const f = decodeFrame(frame);
      seen.push([rank, f.type, f.step, f.values.length]);
      if (rank === 0 && lastOut) assert.ok(frame.equals(lastOut), 'the token frame goes back to rank 0 unchanged');
      const out = stages[rank].forward(frame);
      if (rank === 2) lastOut = out;
      next = loop.next(out);
    }
    assert.deepEqual(seen, [
      [0, 'prompt', 0, 2], [1, 'activations', 0, 64], [2, 'activations', 0, 64],
      [0, 'token', 0, 1], [1, 'activations', 1, 64], [2, 'activations', 1, 64],
      [0, 'token', 1, 1], [1, 'activations', 2, 64], [2, 'activations', 2, 64],
    ]);
    assert.deepEqual(next.value.tokens, generateWhole('hello world', 3).tokens);
    assert.equal(RANKED_LLM.hidden, 64);
  });

  it('refuses malformed and misrouted frames, saying what is wrong', () => {
    const prompt = promptFrame([1, 2, 3]);
    const acts = new RankedLlmStage(0, 3).forward(prompt);
    const middle = () => new RankedLlmStage(1, 3);
    const bad = (edit: (b: Buffer) => void, from = acts) => {
      const b = Buffer.from(from);
      edit(b);
      return b;
    };
    refuses(() => middle().forward(acts.subarray(0, 10)), /10 bytes is shorter than the 16-byte header/);
    refuses(() => middle().forward(bad((b) => b.write('XXXX', 0))), /bad magic 58585858 \(expected "SYRK"\)/);
    refuses(() => middle().forward(bad((b) => (b[4] = 2))), /version 2 \(this code reads version 1\)/);
    refuses(() => middle().forward(bad((b) => (b[5] = 9))), /unknown type 9/);
    refuses(() => middle().forward(bad((b) => (b[7] = 1))), /reserved byte 7 is 1/);
    refuses(() => middle().forward(acts.subarray(0, acts.length - 4)), /header says 64 values \(272 bytes\) but the frame has 268 bytes/);
    refuses(() => middle().forward(Buffer.concat([acts, Buffer.alloc(4)])), /but the frame has 276 bytes/);
    refuses(() => middle().forward(bad((b) => b.writeUInt32LE(1 << 20, 12))), /1048576 values is over the limit of 65536/);
    refuses(() => middle().forward(bad((b) => b.writeInt32LE(5000, FRAME_HEADER_BYTES + 8))), /activation 2 is 5000, outside \[-4096, 4096\]/);
    refuses(() => middle().forward(prompt), /a prompt frame sent to rank 1 of 3, which takes activations frames/);
    refuses(() => middle().forward(promptFrame([1], 'demo-ranked-image')), /a demo-ranked-image frame sent to rank 1 of 3 of demo-ranked-llm/);
    refuses(() => middle().forward(encodeFrame({ type: 'activations', model: 'demo-ranked-llm', step: 0, values: new Int32Array(63) })), /63 values where rank 1 of 3 takes 64/);
    refuses(() => new RankedLlmStage(0, 3).forward(acts), /an? activations frame sent to rank 0 of 3, which takes prompt or token frames/);
    refuses(() => new RankedLlmStage(0, 3).forward(promptFrame([128])), /token 0 is 128, outside \[0, 127\]/);
    const token = (step: number, id = 5) => encodeFrame({ type: 'token', model: 'demo-ranked-llm', step, values: Int32Array.of(id) });
    refuses(() => new RankedLlmStage(0, 3).forward(token(0)), /a token frame sent to rank 0 of 3 before any prompt frame/);
    const first = new RankedLlmStage(0, 3);
    first.forward(prompt);
    refuses(() => first.forward(token(1)), /the token of step 1 sent to rank 0 of 3, which expects the token of step 0/);
    first.forward(token(0));
    refuses(() => first.forward(token(0)), /the token of step 0 sent to rank 0 of 3, which expects the token of step 1/);
    refuses(() => first.forward(encodeFrame({ type: 'prompt', model: 'demo-ranked-llm', step: 3, values: Int32Array.of(1) })), /a prompt frame at step 3 \(prompts are step 0\)/);
    refuses(() => first.forward(promptFrame(new Array(4097).fill(1))), /a prompt of 4097 tokens \(at most 4096\)/);
  });
});

describe('demo-ranked-image', () => {
  it('split into its 2 ranks, writes the PNG it writes whole, byte for byte, pinned', () => {
    for (const prompt of PROMPTS) assert.ok(imageSplit(prompt).equals(imageWhole(prompt)), JSON.stringify(prompt));
    assert.equal(createHash('sha256').update(imageWhole('a red fox in the snow')).digest('hex'), '50e3e5c4d9c5216fef5c462672195fcdac1935cf2013be27aa942073e5b7f3b9');
    assert.notDeepEqual(imageWhole('a red fox'), imageWhole('a blue fox'));
  });

  it('carries each rank digest in a tEXt chunk and as a barcode, rank 0 on top and rank 1 at the bottom', () => {
    const prompt = 'a red fox in the snow';
    const latent = new RankedImageStage(0).forward(promptFrame(tokenize(prompt), 'demo-ranked-image'));
    const lf = decodeFrame(latent);
    assert.deepEqual([lf.type, lf.values.length], ['latent', LATENT_VALUES]);
    const png = new RankedImageStage(1).forward(latent);
    const text = pngText(png);
    assert.equal(text.Software, 'Switchyard demo-ranked-image');
    assert.equal(text['switchyard-rank-0'], latent.subarray(FRAME_HEADER_BYTES, FRAME_HEADER_BYTES + 32).toString('hex'), 'rank 0 digest is the one its latent frame carried');
    assert.match(text['switchyard-rank-1'], /^[0-9a-f]{64}$/);
    assert.notEqual(text['switchyard-rank-1'], text['switchyard-rank-0']);
    const { width, height, rgba } = decodePng(png);
    assert.deepEqual([width, height], [RANKED_IMAGE.side, RANKED_IMAGE.side]);
    const bitsOf = (hex: string) => Array.from({ length: 64 }, (_, x) => (Buffer.from(hex, 'hex')[x >> 3] >> (7 - (x & 7))) & 1);
    const row = (y: number) => Array.from({ length: 64 }, (_, x) => (rgba[(y * 64 + x) * 4] === 255 ? 1 : 0));
    for (const y of [0, 3]) assert.deepEqual(row(y), bitsOf(text['switchyard-rank-0']));
    for (const y of [60, 63]) assert.deepEqual(row(y), bitsOf(text['switchyard-rank-1']));
    // The body between the barcodes is a picture, not black and white.
    const body = new Set(Array.from({ length: 64 * 50 }, (_, i) => rgba[(4 * 64 + i) * 4 + 1]));
    assert.ok(body.size > 50, `only ${body.size} green levels in the body`);
  });

  it('refuses malformed and misrouted frames', () => {
    const latent = new RankedImageStage(0).forward(promptFrame([1, 2], 'demo-ranked-image'));
    refuses(() => new RankedImageStage(1).forward(latent.subarray(0, latent.length - 1)), /but the frame has 815 bytes/);
    const bright = Buffer.from(latent);
    bright.writeInt32LE(256, FRAME_HEADER_BYTES + 4 * 10);
    refuses(() => new RankedImageStage(1).forward(bright), /latent value 10 is 256, outside \[0, 255\]/);
    refuses(() => new RankedImageStage(0).forward(promptFrame([1, 2])), /a demo-ranked-llm frame sent to rank 0 of 2 of demo-ranked-image/);
    refuses(() => new RankedImageStage(1).forward(promptFrame([1], 'demo-ranked-image')), /a prompt frame sent to rank 1 of 2, which takes latent frames/);
    assert.throws(() => new RankedImageStage(2), /has ranks 0 and 1, not 2/);
  });
});
