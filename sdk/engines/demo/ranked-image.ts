import { encodePng } from './png.js';
import { checkCount, checkRange, encodeFrame, expectFrame, RankedFrameError } from './ranked-frames.js';
import { center, dense, int32le, leakyRelu, normalize, seededInts, sha256 } from './ranked-math.js';
import { MAX_PROMPT_TOKENS, tokenize, VOCAB } from './ranked-vocab.js';

/**
 * demo-ranked-image: a picture made by two ranks (issue 27). Rank 0 sees the prompt and turns its
 * tokens into a latent, an 8x8 grid of RGB values; rank 1 sees only that latent and renders a
 * 64x64 PNG from it. Integers only (ranked-math.ts), weights from RANKED_IMAGE.seed, so the twin
 * sdk/python/worker/switchyard_worker/ranked_image.py is interchangeable rank for rank and even
 * writes the same PNG bytes (stored deflate, see png.ts). docs/ranks.md, "The demo ranked models".
 *
 * The PNG proves both ranks ran: each rank's stage digest, sha256 of a label, its weights' digest
 * and the values it was given, is in a tEXt chunk (`switchyard-rank-0`, `switchyard-rank-1`) and
 * drawn as a barcode of its first 64 bits, rank 0's along the top 4 rows, rank 1's along the
 * bottom 4. Rank 0's digest reaches rank 1 inside the latent frame, and rank 1's digest covers it.
 */
export const RANKED_IMAGE = Object.freeze({
  id: 'demo-ranked-image' as const,
  seed: 0x5eed1027,
  ranks: 2,
  hidden: 64,
  grid: 8,
  side: 64,
});

const { seed: SEED, hidden: D, grid: G, side: S } = RANKED_IMAGE;
const V = VOCAB.length;
const CELLS = G * G * 3;
/** The latent frame's values: rank 0's digest as 8 int32 words, then the grid, row by row, RGB. */
export const LATENT_VALUES = 8 + CELLS;
const BAR_ROWS = 4;
const TAG = { embed: 0x1100, weight: 0x1200, bias: 0x1300, out: 0x1400, colour: 0x1500, dither: 0x1600 } as const;

const tensors = new Map<string, Int32Array>();
function tensor(name: keyof typeof TAG, count: number, bits: number): Int32Array {
  let t = tensors.get(name);
  if (!t) tensors.set(name, (t = seededInts(SEED, TAG[name], count, bits)));
  return t;
}
const rank0Weights = () => [tensor('embed', V * D, 12), tensor('weight', D * D, 8), tensor('bias', D, 19), tensor('out', CELLS * D, 8)];
/** Rank 1's colour matrix is near the identity (224/256 on the diagonal) plus small seeded terms. */
function colourMatrix(): Int32Array {
  const m = Int32Array.from(tensor('colour', 9, 6));
  for (let c = 0; c < 3; c++) m[c * 3 + c] += 224;
  return m;
}
const rank1Weights = () => [colourMatrix(), tensor('dither', G * G, 4)];

const digests: Buffer[] = [];
const weightsDigest = (rank: number) => (digests[rank] ??= sha256(...(rank === 0 ? rank0Weights() : rank1Weights()).map(int32le)));
/** A stage's digest: what it is (label, weights) and what it was given (values). */
const stageDigest = (rank: number, given: Int32Array) => sha256(Buffer.from(`${RANKED_IMAGE.id} rank ${rank} of 2\n`), weightsDigest(rank), int32le(given));

/**
 * Rank 0: the prompt's tokens (a bag of words) through one hidden layer to the latent grid, after
 * rank 0's digest as 8 int32 words (the digest's bytes read as int32 LE).
 */
function latentOf(ids: Int32Array): Int32Array {
  const [embed, w, b, out] = rank0Weights();
  const x = new Int32Array(D);
  for (const id of ids) for (let j = 0; j < D; j++) x[j] += embed[id * D + j]; // 4096 x 2^11: below 2^24
  const h = normalize(center(normalize(leakyRelu(dense(normalize(x), w, D, b)))));
  const latent = normalize(dense(h, out, CELLS));
  const values = new Int32Array(LATENT_VALUES);
  const digest = stageDigest(0, ids);
  for (let i = 0; i < 8; i++) values[i] = digest.readInt32LE(i * 4);
  for (let i = 0; i < CELLS; i++) values[8 + i] = Math.max(0, Math.min(255, 128 + (latent[i] >> 4))); // ±2^12 -> ±256: the strongest saturate
  return values;
}

/** Rank 1: bilinear upsampling of the grid, the colour matrix, a dither tile, and the two barcodes. */
function render(latent: Int32Array): Buffer {
  const [m, dither] = rank1Weights();
  const digest0 = Buffer.alloc(32);
  for (let i = 0; i < 8; i++) digest0.writeInt32LE(latent[i], i * 4);
  const digest1 = stageDigest(1, latent);
  const cell = (gx: number, gy: number, c: number) => latent[8 + (gy * G + gx) * 3 + c];
  const px = new Uint8Array(S * S * 3);
  for (let y = 0; y < S; y++) {
    // Pixel centres map onto the grid in 1/256ths: 0 -> cell 0, S-1 -> cell G-1.
    const fy = Math.floor((y * (G - 1) * 256) / (S - 1));
    const y0 = fy >> 8;
    const y1 = Math.min(y0 + 1, G - 1);
    const wy = fy & 255;
    for (let x = 0; x < S; x++) {
      const fx = Math.floor((x * (G - 1) * 256) / (S - 1));
      const x0 = fx >> 8;
      const x1 = Math.min(x0 + 1, G - 1);
      const wx = fx & 255;
      const up = [0, 1, 2].map((c) => {
        const top = cell(x0, y0, c) * (256 - wx) + cell(x1, y0, c) * wx;
        const bottom = cell(x0, y1, c) * (256 - wx) + cell(x1, y1, c) * wx;
        return (top * (256 - wy) + bottom * wy) >> 16;
      });
      for (let c = 0; c < 3; c++) {
        const v = ((m[c * 3] * up[0] + m[c * 3 + 1] * up[1] + m[c * 3 + 2] * up[2]) >> 8) + dither[(y % G) * G + (x % G)];
        px[(y * S + x) * 3 + c] = Math.max(0, Math.min(255, v));
      }
    }
  }
  const bar = (digest: Buffer, row0: number) => {
    for (let y = row0; y < row0 + BAR_ROWS; y++) for (let x = 0; x < S; x++) px.fill((digest[x >> 3] >> (7 - (x & 7))) & 1 ? 255 : 0, (y * S + x) * 3, (y * S + x) * 3 + 3);
  };
  bar(digest0, 0);
  bar(digest1, S - BAR_ROWS);
  const text: Array<[string, string]> = [
    ['Software', `Switchyard ${RANKED_IMAGE.id}`],
    ['switchyard-rank-0', digest0.toString('hex')],
    ['switchyard-rank-1', digest1.toString('hex')],
  ];
  return encodePng(S, S, 3, px, { text, stored: true });
}

/**
 * One rank of demo-ranked-image, stateless. Rank 0: a prompt frame (step 0) in, a latent frame
 * out. Rank 1: a latent frame in, the PNG's bytes out (the job's artifact, not a frame).
 */
export class RankedImageStage {
  constructor(readonly rank: number) {
    if (rank !== 0 && rank !== 1) throw new RangeError(`${RANKED_IMAGE.id} has ranks 0 and 1, not ${rank}`);
  }

  /** Hex sha256 of the stage's weights as int32 LE. */
  get weightsDigest(): string {
    return weightsDigest(this.rank).toString('hex');
  }

  forward(bytes: Uint8Array): Buffer {
    const who = `rank ${this.rank} of 2`;
    if (this.rank === 0) {
      const f = expectFrame(bytes, RANKED_IMAGE.id, ['prompt'], who);
      if (f.step !== 0) throw new RankedFrameError(`ranked frame: a prompt frame at step ${f.step} (prompts are step 0)`);
      checkRange(f, 0, V - 1, 'token');
      if (f.values.length > MAX_PROMPT_TOKENS) throw new RankedFrameError(`ranked frame: a prompt of ${f.values.length} tokens (at most ${MAX_PROMPT_TOKENS})`);
      return encodeFrame({ type: 'latent', model: RANKED_IMAGE.id, step: 0, values: latentOf(f.values) });
    }
    const f = expectFrame(bytes, RANKED_IMAGE.id, ['latent'], who);
    checkCount(f, LATENT_VALUES, who);
    const bad = f.values.findIndex((v, i) => i >= 8 && (v < 0 || v > 255));
    if (bad >= 0) throw new RankedFrameError(`ranked frame: latent value ${bad} is ${f.values[bad]}, outside [0, 255]`);
    return render(f.values);
  }
}

/** The model run whole in one process, without frames: the PNG a split run must equal. */
export function imageWhole(prompt: string): Buffer {
  return render(latentOf(Int32Array.from(tokenize(prompt))));
}

/** The model as two stages in this process: the prompt frame through rank 0, its latent frame through rank 1. */
export function imageSplit(prompt: string): Buffer {
  const latent = new RankedImageStage(0).forward(encodeFrame({ type: 'prompt', model: RANKED_IMAGE.id, step: 0, values: Int32Array.from(tokenize(prompt)) }));
  return new RankedImageStage(1).forward(latent);
}
