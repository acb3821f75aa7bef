import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';

/**
 * Files stay readable in one sitting: a source file of the layers (api/, dispatch/, models/,
 * queues/, sdk/) longer than 400 lines says why at its top, in a comment among its first five
 * lines that names the limit ("over 400 lines"), or it is split. A file that grows past the
 * limit fails here with its name and length, so the reason is written when the file grows, not
 * found later by a reader.
 */

const ROOT = path.resolve(import.meta.dirname, '..');
const LAYERS = ['api', 'dispatch', 'models', 'queues', 'sdk'];
const LIMIT = 400;
const SOURCE = /\.(ts|mts|mjs|js|py|go)$/;
/** Made by builds, installs and runs, not written by hand. */
const GENERATED = new Set(['node_modules', 'dist', 'build', '__pycache__', '.pytest_cache', '.venv']);

function sources(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
    const rel = `${dir}/${entry.name}`;
    if (entry.isDirectory()) {
      if (!GENERATED.has(entry.name) && !entry.name.endsWith('.egg-info')) out.push(...sources(rel));
    } else if (SOURCE.test(entry.name) && !entry.name.endsWith('.d.ts')) {
      out.push(rel);
    }
  }
  return out;
}

/** The file's first lines hold a comment naming the limit. */
function saysWhy(text: string): boolean {
  return text
    .split('\n')
    .slice(0, 5)
    .some((line) => /^\s*(\/\/|\/\*|\*|#|""")/.test(line) && /over 400 lines/i.test(line));
}

describe('file size: source files of the layers', () => {
  it('are at most 400 lines, or say at their top why they are longer', () => {
    const files = LAYERS.flatMap(sources);
    assert.ok(files.length > 100, `found only ${files.length} source files: the walk is wrong`);
    const long = files
      .map((file) => ({ file, text: readFileSync(path.join(ROOT, file), 'utf8') }))
      .map(({ file, text }) => ({ file, text, lines: text.split('\n').length - (text.endsWith('\n') ? 1 : 0) }))
      .filter(({ lines, text }) => lines > LIMIT && !saysWhy(text))
      .map(({ file, lines }) => `${file} (${lines} lines)`);
    assert.deepEqual(long, [], `split these, or say at their top why they are over ${LIMIT} lines`);
  });

  it('accepts a reason in the comment syntax of each language', () => {
    assert.ok(saysWhy('// Over 400 lines: one table.\nexport {}'));
    assert.ok(saysWhy('/**\n * Over 400 lines: one state machine.\n */'));
    assert.ok(saysWhy('#!/usr/bin/env python3\n# over 400 lines: the protocol in one place\n'));
    assert.ok(!saysWhy('export const note = "over 400 lines";'));
    assert.ok(!saysWhy('\n\n\n\n\n// over 400 lines: too far down'));
  });
});
