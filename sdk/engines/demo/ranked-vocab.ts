import { fnv1a32 } from './ranked-math.js';

/**
 * The words of the demo ranked models: token 0 ends a generation (and pads a short context),
 * tokens 1..127 are these words in order. Plain English so a greedy run reads as word salad
 * rather than numbers. Twin: sdk/python/worker/switchyard_worker/ranked_vocab.py (the same string).
 */
const WORDS = `the a an and or but of to in on at with from under over near is was are were has had will can i
you he she it we they this that some every no cat dog fox bird fish tree river stone house road
city sea sky sun moon star rain wind fire light night day song book door window garden mountain
forest ship train machine worker gateway job queue model token word red orange yellow green blue
purple pink brown black white gray gold silver small large old new quiet bright dark warm cold
fast slow happy strange runs walks sleeps sings reads writes builds finds sees holds waits opens
carries slowly quickly again together always never here there today hello world time water`;

export const END_TOKEN = 0;
export const VOCAB: readonly string[] = Object.freeze(['<end>', ...WORDS.split(/\s+/)]);
/** A prompt longer than this keeps its last MAX_PROMPT_TOKENS tokens. */
export const MAX_PROMPT_TOKENS = 4096;

const INDEX = new Map(VOCAB.map((w, i) => [w, i]));

/** Bytes of a word: ASCII letters and digits, and every byte of a non-ASCII character. */
const isWordByte = (b: number) => (b >= 0x61 && b <= 0x7a) || (b >= 0x30 && b <= 0x39) || b >= 0x80;

/**
 * Token ids of a text, the same in both languages: its UTF-8 bytes (a lone surrogate as U+FFFD)
 * with ASCII A-Z lowered (no Unicode case tables, which differ between runtimes), split into
 * runs of word bytes. A word of the vocabulary is its id; any other is 1 + FNV-1a(its bytes)
 * mod 127, never the end token.
 */
export function tokenize(text: string): number[] {
  const bytes = Buffer.from(text, 'utf8');
  for (let i = 0; i < bytes.length; i++) if (bytes[i] >= 0x41 && bytes[i] <= 0x5a) bytes[i] += 0x20;
  const ids: number[] = [];
  for (let i = 0; i < bytes.length; ) {
    if (!isWordByte(bytes[i])) {
      i++;
      continue;
    }
    let end = i;
    while (end < bytes.length && isWordByte(bytes[end])) end++;
    const word = bytes.subarray(i, end);
    ids.push(INDEX.get(word.toString('latin1')) ?? 1 + (fnv1a32(word) % (VOCAB.length - 1)));
    i = end;
  }
  return ids.slice(-MAX_PROMPT_TOKENS);
}

/** The words of generated ids, space-separated; the end token writes nothing. */
export function detokenize(ids: readonly number[]): string {
  return ids
    .filter((id) => id !== END_TOKEN)
    .map((id) => VOCAB[id])
    .join(' ');
}
