import type { EngineContext, EngineResult, RankContext } from '../types.js';
import { int, str } from './inputs.js';
import { throwIfAborted } from './job.js';
import { RankedFrameError } from './ranked-frames.js';
import { imageWhole, RANKED_IMAGE, RankedImageStage } from './ranked-image.js';
import { promptFrame, RANKED_LLM, RankedLlmStage, readTokenFrame } from './ranked-llm.js';
import { detokenize, END_TOKEN, tokenize, VOCAB } from './ranked-vocab.js';

/**
 * The demo engine's side of the demo ranked models (docs/ranks.md): `demo-ranked-llm` and
 * `demo-ranked-image`, served whole (a job naming the model, no `ctx.rank`) or one rank of a
 * pipeline (`ctx.rank`, protocol 6), with the frames of docs/ranks.md, "Frame layout". A run split
 * over ranks gives the output of the run whole, byte for byte: the same `text`, `finish_reason`
 * and `model`, the same PNG.
 *
 * The output is what the last rank can know. It never sees the input, so neither form reports
 * `usage` (it would need the prompt's token count; the OpenAI surface then estimates it, as
 * docs/openai.md says) and `finish_reason` comes from the last token: `stop` after the end token,
 * else `length`. --demo-delay-ms does not apply: the models do their (small) real work.
 */

const LLM_KIND = 'inference:llm:text-generate';
const IMAGE_KIND = 'inference:image:generate';
/** The ranked model of each kind the demo engine serves. */
export const DEMO_RANKED_MODELS: Readonly<Record<string, string>> = Object.freeze({ [LLM_KIND]: RANKED_LLM.id, [IMAGE_KIND]: RANKED_IMAGE.id });
/** The llm kind's default `max_tokens`, the demo engine's for every llm model. */
const DEFAULT_MAX_TOKENS = 256;
/** The whole model yields to the event loop this often, so a long generation can be aborted and the heartbeats go on. */
const YIELD_EVERY = 64;

/** Whether the demo engine runs this job as a ranked model: a rank lease, or a job naming one of them. */
export function isRankedDemoJob(kind: string, input: Record<string, unknown>, ctx: EngineContext): boolean {
  return ctx.rank !== undefined || (DEMO_RANKED_MODELS[kind] !== undefined && input.model === DEMO_RANKED_MODELS[kind]);
}

export async function runRankedDemo(kind: string, input: Record<string, unknown>, ctx: EngineContext): Promise<EngineResult> {
  const { rank } = ctx;
  if (rank && DEMO_RANKED_MODELS[kind] !== rank.model) {
    throw Object.assign(new Error(`the demo engine serves ranks of ${Object.entries(DEMO_RANKED_MODELS).map(([k, m]) => `${m} (${k})`).join(' and ')}, not of ${rank.model} for ${kind}`), { code: 'unsupported_model', retryable: false });
  }
  throwIfAborted(ctx.signal);
  const result = kind === LLM_KIND ? await (rank ? llmRank(input, ctx, rank) : llmWhole(input, ctx)) : await (rank ? imageRank(input, rank) : imageResult(imageWhole(str(input, 'prompt'))));
  ctx.progress(1, 'done');
  return result;
}

/** The prompt: `prompt`, else the text of the messages (the OpenAI surface sends those). */
function promptOf(input: Record<string, unknown>): string {
  const prompt = str(input, 'prompt');
  if (prompt || !Array.isArray(input.messages)) return prompt;
  const textOf = (c: unknown): string => (typeof c === 'string' ? c : Array.isArray(c) ? c.map((p) => (typeof p?.text === 'string' ? p.text : '')).join(' ') : '');
  return input.messages.map((m) => (m && typeof m === 'object' ? textOf((m as { content?: unknown }).content) : '')).join('\n');
}

/** The llm output of the generated tokens: all the last rank knows. */
function llmResult(tokens: number[]): EngineResult {
  return { artifacts: [], extra: { text: detokenize(tokens), finish_reason: tokens.at(-1) === END_TOKEN ? 'stop' : 'length', model: RANKED_LLM.id } };
}

/** Streams a generated token's word as the whole text's next delta (the end token writes nothing). */
function streamToken(ctx: EngineContext, tokens: number[]): void {
  const token = tokens.at(-1)!;
  if (token !== END_TOKEN) ctx.output(tokens.length === 1 ? VOCAB[token] : ` ${VOCAB[token]}`);
}

/** The whole model, as one stage holding every layer (a split run must equal it: test/ranked-model.test.ts). */
async function llmWhole(input: Record<string, unknown>, ctx: EngineContext): Promise<EngineResult> {
  const maxTokens = int(input, 'max_tokens', DEFAULT_MAX_TOKENS, 1, 1_000_000);
  const stage = new RankedLlmStage(0, 1);
  const tokens: number[] = [];
  for (let frame = stage.forward(promptFrame(tokenize(promptOf(input)))); ; frame = stage.forward(frame)) {
    tokens.push(readTokenFrame(frame).token);
    streamToken(ctx, tokens);
    if (tokens.at(-1) === END_TOKEN || tokens.length >= maxTokens) return llmResult(tokens);
    if (tokens.length % YIELD_EVERY === 0) await new Promise((resolve) => setImmediate(resolve));
    throwIfAborted(ctx.signal);
  }
}

/**
 * One rank of demo-ranked-llm. Rank 0 holds the loop: it sends the prompt's activations, and for
 * each token frame the last rank sends back decides whether to go on (not after the end token or
 * `max_tokens` tokens); a middle rank forwards each frame through its layers; the last rank
 * samples each token, sends it back to rank 0 and streams its word. Each ends its stream when it
 * is done, so the end flags run down the pipeline from rank 0 and the last rank finishes last.
 */
async function llmRank(input: Record<string, unknown>, ctx: EngineContext, rank: RankContext): Promise<EngineResult> {
  const stage = new RankedLlmStage(rank.index, rank.count);
  if (rank.first) {
    const maxTokens = int(input, 'max_tokens', DEFAULT_MAX_TOKENS, 1, 1_000_000);
    let generated = 0;
    await rank.send(stage.forward(promptFrame(tokenize(promptOf(input)))));
    for await (const frame of rank.frames) {
      const { token } = readTokenFrame(frame);
      if (token === END_TOKEN || ++generated >= maxTokens) break;
      await rank.send(stage.forward(frame));
    }
    await rank.end();
    return { artifacts: [] };
  }
  if (!rank.last) {
    for await (const frame of rank.frames) await rank.send(stage.forward(frame));
    return { artifacts: [] };
  }
  const tokens: number[] = [];
  for await (const frame of rank.frames) {
    const out = stage.forward(frame);
    tokens.push(readTokenFrame(out).token);
    streamToken(ctx, tokens);
    await rank.send(out);
  }
  if (tokens.length === 0) throw Object.assign(new Error(`${RANKED_LLM.id}: the ranks before ended their streams before any token`), { retryable: true });
  await rank.end();
  return llmResult(tokens);
}

function imageResult(png: Buffer): EngineResult {
  return { artifacts: [{ name: 'image.png', contentType: 'image/png', data: png }], extra: { width: RANKED_IMAGE.side, height: RANKED_IMAGE.side } };
}

/** One rank of demo-ranked-image: rank 0 sends the prompt's latent, rank 1 renders it to the PNG. */
async function imageRank(input: Record<string, unknown>, rank: RankContext): Promise<EngineResult> {
  if (rank.count !== RANKED_IMAGE.ranks) throw Object.assign(new Error(`${RANKED_IMAGE.id} is served in ${RANKED_IMAGE.ranks} ranks, not ${rank.count}`), { code: 'unsupported_model', retryable: false });
  const stage = new RankedImageStage(rank.index);
  if (rank.first) {
    await rank.send(stage.forward(promptFrame(tokenize(str(input, 'prompt')), RANKED_IMAGE.id)));
    await rank.end();
    return { artifacts: [] };
  }
  let png: Buffer | undefined;
  for await (const frame of rank.frames) {
    if (png) throw new RankedFrameError(`ranked frame: a second latent frame sent to rank 1 of 2 (a picture takes one)`);
    png = stage.forward(frame);
  }
  if (!png) throw Object.assign(new Error(`${RANKED_IMAGE.id}: rank 0 ended its stream without a latent`), { retryable: true });
  await rank.end();
  return imageResult(png);
}
