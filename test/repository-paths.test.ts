import assert from 'node:assert/strict';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { commentSyntax, commentsOf } from './helpers/source-comments.js';

/**
 * Every repository path the docs and the code comments name exists, so a reader who follows one
 * finds the folder or file it speaks of, and a move or rename that leaves a stale mention fails
 * here with the file and line to fix.
 *
 * What counts as a repository path, in any Markdown file and in the comments of every source
 * file (TypeScript, JavaScript, Python, Go, shell, Dockerfile, YAML, TOML):
 * - a token with a `/` whose first segment is an entry of the repository's root (`api/`,
 *   `docs/README.md`, `.ci/run`, `./sdk/python`), read from the root; a trailing `/` asks for a
 *   folder, and a `#anchor`, `?query` or `:line` suffix is dropped;
 * - the target of a relative Markdown link, resolved against the linking file's folder (a
 *   leading `/` against the root), which must also stay inside the repository.
 * Not paths, by rule: URLs (a `scheme://` and all that follows, so routes inside them too),
 * tokens that start with `/` (HTTP routes such as `/v1/jobs`, absolute paths), tokens with a
 * placeholder or glob (`*`, `<`, `>`, `{`, `}`, `$`, `...`), anything inside what builds,
 * installs and runs make (node_modules, dist, build, caches, the data folder), which a fresh
 * checkout does not hold, and another project's paths, written after its name's possessive
 * (Cog's docs/http.md, ComfyUI's `models/checkpoints`).
 */

const ROOT = path.resolve(import.meta.dirname, '..');

/** Folders made by builds, installs, tests and runs: neither scanned nor checked. */
const GENERATED = new Set(['node_modules', 'dist', 'build', '.git', '.data', '__pycache__', '.pytest_cache', '.venv']);
const generated = (name: string) => GENERATED.has(name) || name.endsWith('.egg-info');

const URL_TEXT = /\b[a-z][a-z0-9+.-]*:\/\/\S*/gi;
/** A capitalized name's possessive and the token after it: a path of that other project. */
const FOREIGN_PATH = /\b[A-Z][\w.+-]*'s\s+`?[^\s`]*/g;
const PLACEHOLDER = /[*<>{}$…]|\.\.\./;
const SCHEME = /^[a-z][a-z0-9+.-]*:/i;
const MARKDOWN_LINK = /\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g;
const REFERENCE_LINK = /^\s*\[[^\]]+\]:\s*(\S+)/;

/** Every file under `dir` (relative to the root, with `/`), generated folders left out. */
function filesUnder(dir: string): string[] {
  return readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((e) => {
    const rel = dir ? `${dir}/${e.name}` : e.name;
    if (e.isDirectory()) return generated(e.name) ? [] : filesUnder(rel);
    return e.isFile() ? [rel] : [];
  });
}

const ROOT_ENTRIES = new Set(readdirSync(ROOT).filter((name) => !generated(name)));

/** The repository paths a line of prose or comment names, by the rules above. */
export function pathsNamed(text: string): string[] {
  const found: string[] = [];
  for (const token of text.replace(URL_TEXT, ' ').replace(FOREIGN_PATH, ' ').split(/[\s`'"()[\],;|=]+/)) {
    if (!token || token.startsWith('/') || PLACEHOLDER.test(token)) continue;
    const candidate = token
      .replace(/^(\.\/)+/, '')
      .replace(/[#?].*$/, '')
      .replace(/(:\d+)+$/, '')
      .replace(/[.:!?]+$/, '');
    const segments = candidate.split('/');
    if (segments.length < 2 || !ROOT_ENTRIES.has(segments[0])) continue;
    if (segments.some(generated)) continue;
    found.push(candidate);
  }
  return found;
}

/** Why `target` (absolute, with the `/` it was written with) is not there, or undefined. */
function missing(target: string, written: string): string | undefined {
  // Without its trailing `/`: a file's path with one is ENOTDIR, not a missing entry.
  const stat = statSync(target.replace(/\/+$/, ''), { throwIfNoEntry: false });
  if (!stat) return 'no such file or folder';
  if (written.endsWith('/') && !stat.isDirectory()) return 'is a file, not a folder';
  return undefined;
}

interface Mention {
  file: string;
  line: number;
  written: string;
  /** Absolute path it names. */
  target: string;
}

/** The relative link targets of a Markdown line (URLs and in-page anchors left out). */
function linkTargets(text: string): string[] {
  const targets = [...text.matchAll(MARKDOWN_LINK)].map((m) => m[1]);
  const reference = REFERENCE_LINK.exec(text);
  if (reference) targets.push(reference[1]);
  return targets.filter((t) => !SCHEME.test(t) && !t.startsWith('#'));
}

function mentionsInMarkdown(file: string): Mention[] {
  const mentions: Mention[] = [];
  readFileSync(path.join(ROOT, file), 'utf8')
    .split('\n')
    .forEach((text, i) => {
      for (const written of linkTargets(text)) {
        const pathPart = decodeURI(written.replace(/[#?].*$/, ''));
        const base = pathPart.startsWith('/') ? ROOT : path.join(ROOT, path.dirname(file));
        mentions.push({ file, line: i + 1, written: pathPart, target: path.join(base, pathPart) });
      }
      // A link's target is relative to its file, not the root: it was checked just above.
      for (const written of pathsNamed(text.replace(MARKDOWN_LINK, ']()'))) {
        mentions.push({ file, line: i + 1, written, target: path.join(ROOT, written) });
      }
    });
  return mentions;
}

function mentionsInComments(file: string): Mention[] {
  const source = readFileSync(path.join(ROOT, file), 'utf8');
  const syntax = commentSyntax(file, source.split('\n', 1)[0]);
  if (!syntax) return [];
  return commentsOf(source, syntax).flatMap(({ line, text }) =>
    pathsNamed(text).map((written) => ({ file, line, written, target: path.join(ROOT, written) })),
  );
}

/** Each mention whose path is missing or outside the repository, as `file:line: path: why`. */
function stale(mentions: Mention[]): string[] {
  return mentions.flatMap(({ file, line, written, target }) => {
    const inside = target === ROOT || target.startsWith(ROOT + path.sep);
    const why = inside ? missing(target, written) : 'outside the repository';
    return why ? [`${file}:${line}: ${written}: ${why}`] : [];
  });
}

const report = (problems: string[], what: string) =>
  `${problems.length} ${what} that do not exist (fix the mention, or write a placeholder as <name>):\n  ${problems.join('\n  ')}`;

describe('repository paths named in docs and comments', () => {
  const files = filesUnder('');

  it('finds the files it reads (Markdown and sources of every language)', () => {
    // Guards the scan itself: a walk that silently found nothing would pass every check below.
    for (const expected of ['README.md', 'docs/architecture.md', 'sdk/worker/README.md', 'dashboards/README.md', 'api/main/config.ts', 'sdk/go/client.go', 'sdk/python/switchyard/client.py', '.ci/run', 'Dockerfile']) {
      assert.ok(files.includes(expected), `the scan did not reach ${expected}`);
    }
  });

  it('tells repository paths from routes, URLs, placeholders and build outputs', () => {
    assert.deepEqual(pathsNamed('see docs/api.md#errors, `api/http/routes/` and ./sdk/python.'), ['docs/api.md', 'api/http/routes/', 'sdk/python']);
    assert.deepEqual(pathsNamed('GET /v1/jobs, https://example.com/api/x, api/services/<capability>/, docs/*.md, sdk/go/...'), []);
    assert.deepEqual(pathsNamed('sdk/worker/dist/index.js, DATA_DIR/artifacts, @switchyard/worker/engines/demo'), []);
    assert.deepEqual(pathsNamed("Cog's docs/http.md, ComfyUI's `models/checkpoints`, the worker's sdk/worker/"), ['sdk/worker/']);
  });

  it('names only paths that exist in the Markdown files (prose, code and links)', () => {
    const problems = stale(files.filter((f) => f.endsWith('.md')).flatMap(mentionsInMarkdown));
    assert.equal(problems.length, 0, report(problems, 'paths named in Markdown'));
  });

  it('names only paths that exist in the comments of the source files', () => {
    const problems = stale(files.flatMap(mentionsInComments));
    assert.equal(problems.length, 0, report(problems, 'paths named in comments'));
  });
});
