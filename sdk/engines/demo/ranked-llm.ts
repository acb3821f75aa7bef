import { checkCount, checkRange, encodeFrame, expectFrame, RankedFrameError } from './ranked-frames.js';
import { ACT_LIMIT, argmax, center, dense, int32le, leakyRelu, normalize, seededInts, sha256 } from './ranked-math.js';
import { detokenize, END_TOKEN, MAX_PROMPT_TOKENS, tokenize, VOCAB } from './ranked-vocab.js';

/**
 * demo-ranked-llm: a tiny decoder whose layers can be split over ranks (issue 27). Integers only
 * (ranked-math.ts), weights from a counter-based stream of RANKED_LLM.seed, so a TypeScript rank
 * and a Python rank (sdk/python/worker/switchyard_worker/ranked_llm.py) are interchangeable and a
 * split run equals the whole one byte for byte. docs/ranks.md, "The demo ranked models".
 *
 *   x = normalize(sum over the context's 4 positions p of E_p[token])      embedding, rank 0
 *   x = normalize(x + normalize(leakyRelu(W_l x + b_l)))  for l = 0..5     layers, split
 *   next = argmax(H x), ties to the lowest id                             head, last rank
 */
export const RANKED_LLM = Object.freeze({
  id: 'demo-ranked-llm' as const,
  seed: 0x5eed0027,
  vocab: VOCAB.length,
  hidden: 64,
  context: 4,
  layers: 6,
});

const { seed: SEED, vocab: V, hidden: D, context: C, layers: L } = RANKED_LLM;
/** Weight stream tags: a tensor's stream does not depend on any other tensor's. */
const TAG = { embed: 0x100, weight: 0x200, bias: 0x300, head: 0x400 } as const;

const tensors = new Map<string, Int32Array>();
/** Lazily made and shared by every stage in the process: weights depend on the seed alone. */
function tensor(name: string, tag: number, count: number, bits: number): Int32Array {
  let t = tensors.get(name);
  if (!t) tensors.set(name, (t = seededInts(SEED, tag, count, bits)));
  return t;
}
const embedding = (p: number) => tensor(`embed${p}`, TAG.embed + p, V * D, 12);
const weight = (l: number) => tensor(`weight${l}`, TAG.weight + l, D * D, 8);
const bias = (l: number) => tensor(`bias${l}`, TAG.bias + l, D, 19);
const head = () => tensor('head', TAG.head, V * D, 8);

/** The context window of the last C tokens, padded on the left with the end token. */
function contextOf(ids: readonly number[]): Int32Array {
  const ctx = new Int32Array(C).fill(END_TOKEN);
  const tail = ids.slice(-C);
  ctx.set(tail, C - tail.length);
  return ctx;
}

function embed(ctx: Int32Array): Int32Array {
  const x = new Int32Array(D);
  for (let p = 0; p < C; p++) {
    const table = embedding(p);
    for (let j = 0; j < D; j++) x[j] += table[ctx[p] * D + j];
  }
  return normalize(x);
}

/** One residual layer: the residual keeps the context in the hidden state, the norms bound it. */
function layer(l: number, x: Int32Array): Int32Array {
  const a = normalize(leakyRelu(dense(x, weight(l), D, bias(l))));
  for (let i = 0; i < D; i++) a[i] += x[i];
  return normalize(center(a));
}

const nextToken = (x: Int32Array) => argmax(dense(x, head(), V));

/** Layers [start, end) of rank `rank` of `ranks`: contiguous, sizes differing by at most one. */
export function layerRange(rank: number, ranks: number): [number, number] {
  if (!Number.isInteger(ranks) || ranks < 1 || ranks > L) throw new RangeError(`${RANKED_LLM.id} splits into 1 to ${L} ranks, not ${ranks}`);
  if (!Number.isInteger(rank) || rank < 0 || rank >= ranks) throw new RangeError(`rank ${rank} is not one of 0..${ranks - 1}`);
  return [Math.floor((rank * L) / ranks), Math.floor(((rank + 1) * L) / ranks)];
}

/** The frame rank 0 starts a generation with: the prompt's token ids at step 0. */
export function promptFrame(ids: readonly number[], model: 'demo-ranked-llm' | 'demo-ranked-image' = RANKED_LLM.id): Buffer {
  return encodeFrame({ type: 'prompt', model, step: 0, values: Int32Array.from(ids) });
}

/** What the last rank sent: the token sampled at `step`. The same frame goes back to rank 0. */
export function readTokenFrame(frame: Uint8Array): { step: number; token: number } {
  const f = expectFrame(frame, RANKED_LLM.id, ['token'], 'the pipeline driver');
  checkCount(f, 1, 'the pipeline driver');
  return { step: f.step, token: f.values[0] };
}

/**
 * One rank of demo-ranked-llm. Rank 0 takes a prompt frame (step 0; resets its context) or the
 * token frame the last rank sent for the step it computed last, and keeps the context window, so
 * use one rank-0 stage per generation. Other ranks are stateless: activations in, activations
 * (or, last, a token frame) out, at the step of the frame they got. Malformed or misrouted
 * frames throw a RankedFrameError.
 */
export class RankedLlmStage {
  readonly layers: [number, number];
  readonly first: boolean;
  readonly last: boolean;
  private context: Int32Array | null = null;
  private step = 0;
  private digest?: string;

  constructor(
    readonly rank: number,
    readonly ranks = 3,
  ) {
    this.layers = layerRange(rank, ranks);
    this.first = rank === 0;
    this.last = rank === ranks - 1;
  }

  /** Hex sha256 of the stage's weights as int32 LE (embeddings, its layers' W and b, head), for checking both ends load one model. */
  get weightsDigest(): string {
    if (!this.digest) {
      const parts: Int32Array[] = [];
      if (this.first) for (let p = 0; p < C; p++) parts.push(embedding(p));
      for (let l = this.layers[0]; l < this.layers[1]; l++) parts.push(weight(l), bias(l));
      if (this.last) parts.push(head());
      this.digest = sha256(...parts.map(int32le)).toString('hex');
    }
    return this.digest;
  }

  forward(bytes: Uint8Array): Buffer {
    const who = `rank ${this.rank} of ${this.ranks}`;
    let x: Int32Array;
    let step: number;
    if (this.first) {
      const f = expectFrame(bytes, RANKED_LLM.id, ['prompt', 'token'], who);
      checkRange(f, 0, V - 1, 'token');
      if (f.type === 'prompt') {
        if (f.step !== 0) throw new RankedFrameError(`ranked frame: a prompt frame at step ${f.step} (prompts are step 0)`);
        if (f.values.length > MAX_PROMPT_TOKENS) throw new RankedFrameError(`ranked frame: a prompt of ${f.values.length} tokens (at most ${MAX_PROMPT_TOKENS})`);
        this.context = contextOf(Array.from(f.values));
        this.step = 0;
      } else {
        if (!this.context) throw new RankedFrameError(`ranked frame: a token frame sent to ${who} before any prompt frame`);
        if (f.step !== this.step) throw new RankedFrameError(`ranked frame: the token of step ${f.step} sent to ${who}, which expects the token of step ${this.step}`);
        checkCount(f, 1, `${who} (a token frame)`);
        this.context = contextOf([...this.context, f.values[0]]);
        this.step++;
      }
      x = embed(this.context);
      step = this.step;
    } else {
      const f = expectFrame(bytes, RANKED_LLM.id, ['activations'], who);
      checkCount(f, D, who);
      checkRange(f, -ACT_LIMIT, ACT_LIMIT, 'activation');
      x = f.values;
      step = f.step;
    }
    for (let l = this.layers[0]; l < this.layers[1]; l++) x = layer(l, x);
    if (this.last) return encodeFrame({ type: 'token', model: RANKED_LLM.id, step, values: Int32Array.of(nextToken(x)) });
    return encodeFrame({ type: 'activations', model: RANKED_LLM.id, step, values: x });
  }
}

export interface Generation {
  /** Generated ids, the end token included when it came. */
  tokens: number[];
  /** The generated words (detokenize). */
  text: string;
  finish: 'stop' | 'length';
}

function checkMaxTokens(maxTokens: number): void {
  if (!Number.isInteger(maxTokens) || maxTokens < 0) throw new RangeError(`max_tokens must be a non-negative integer, not ${maxTokens}`);
}

const generation = (tokens: number[]): Generation => ({ tokens, text: detokenize(tokens), finish: tokens.at(-1) === END_TOKEN ? 'stop' : 'length' });

/** The model run whole in one process, without frames: the reference a split run must equal. */
export function generateWhole(prompt: string, maxTokens: number): Generation {
  checkMaxTokens(maxTokens);
  let ctx = contextOf(tokenize(prompt));
  const tokens: number[] = [];
  while (tokens.length < maxTokens) {
    let x = embed(ctx);
    for (let l = 0; l < L; l++) x = layer(l, x);
    const token = nextToken(x);
    tokens.push(token);
    if (token === END_TOKEN) break;
    ctx = contextOf([...ctx, token]);
  }
  return generation(tokens);
}

/**
 * The gateway's loop, as a generator: it yields each (rank, frame) to forward and is resumed with
 * that rank's answer; rank 0 gets the prompt frame, each rank the one before's output, and the
 * last rank's token frame goes back to rank 0 until max_tokens or the end token.
 */
export function* pipelineLoop(prompt: string, maxTokens: number, ranks: number): Generator<{ rank: number; frame: Buffer }, Generation, Uint8Array> {
  checkMaxTokens(maxTokens);
  layerRange(0, ranks);
  let frame: Uint8Array = promptFrame(tokenize(prompt));
  const tokens: number[] = [];
  while (tokens.length < maxTokens) {
    for (let rank = 0; rank < ranks; rank++) frame = yield { rank, frame: Buffer.from(frame) };
    const { step, token } = readTokenFrame(frame);
    if (step !== tokens.length) throw new RankedFrameError(`ranked frame: the last rank answered step ${step} during step ${tokens.length}`);
    tokens.push(token);
    if (token === END_TOKEN) break;
  }
  return generation(tokens);
}

/** The model split over `ranks` stages in this process, driven as the gateway will drive workers. */
export function generateSplit(prompt: string, maxTokens: number, ranks = 3): Generation {
  const stages = Array.from({ length: ranks }, (_, r) => new RankedLlmStage(r, ranks));
  const loop = pipelineLoop(prompt, maxTokens, ranks);
  for (let next = loop.next(new Uint8Array()); ; ) {
    if (next.done) return next.value;
    next = loop.next(stages[next.value.rank].forward(next.value.frame));
  }
}

/** Forwards one frame on one rank, wherever that rank runs (another process, another language). */
export type Forward = (frame: Buffer) => Uint8Array | Promise<Uint8Array>;

/** generateSplit with each rank's forward supplied by the caller: one per rank, rank 0 first. */
export async function generateSplitWith(prompt: string, maxTokens: number, forwards: Forward[]): Promise<Generation> {
  const loop = pipelineLoop(prompt, maxTokens, forwards.length);
  for (let next = loop.next(new Uint8Array()); ; ) {
    if (next.done) return next.value;
    next = loop.next(await forwards[next.value.rank](next.value.frame));
  }
}
