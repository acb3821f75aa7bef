/**
 * The comments of a source file, line by line, for tests that read what comments say (such as
 * the repository paths they name). Each language gets a small lexer that knows its strings, so
 * `//` in 'https://...' or `#` in "a#b" is not taken for a comment. Python's triple-quoted
 * strings count as comments: they are its docstrings.
 */
export interface CommentLine {
  /** 1-based line of the source. */
  line: number;
  text: string;
}

export type CommentSyntax = 'js' | 'go' | 'python' | 'hash';

/** The comment syntax of a file by its name, or undefined for files without comments we read. */
export function commentSyntax(file: string, firstLine: string): CommentSyntax | undefined {
  const base = file.split('/').pop()!;
  if (/\.(ts|mts|cts|js|mjs|cjs)$/.test(base)) return 'js';
  if (base.endsWith('.go')) return 'go';
  if (base.endsWith('.py')) return 'python';
  if (/\.(ya?ml|toml|sh)$/.test(base) || base === 'Dockerfile') return 'hash';
  if (!base.includes('.') && firstLine.startsWith('#!')) return 'hash'; // scripts such as .ci/run
  return undefined;
}

export function commentsOf(source: string, syntax: CommentSyntax): CommentLine[] {
  if (syntax === 'hash') return hashComments(source);
  if (syntax === 'python') return pythonComments(source);
  return cLikeComments(source, syntax === 'js');
}

/** Pushes `text` (which may span lines) starting at `line`, one entry per line. */
function emit(out: CommentLine[], line: number, text: string): void {
  text.split('\n').forEach((t, i) => out.push({ line: line + i, text: t }));
}

const countLines = (s: string) => s.split('\n').length - 1;

/** Words after which a `/` starts a regular expression rather than a division. */
const BEFORE_REGEX = new Set(['return', 'typeof', 'case', 'do', 'else', 'in', 'of', 'new', 'delete', 'void', 'throw', 'yield', 'await']);
const WORD = /[\w$]+/y;

/** `//` and `/* *\/` comments of TypeScript, JavaScript and Go (with strings, templates and regexes skipped). */
function cLikeComments(src: string, js: boolean): CommentLine[] {
  const out: CommentLine[] = [];
  let i = 0;
  let line = 1;
  let lastChar = '';
  let lastWord = '';

  const skipQuoted = (quote: string) => {
    i++;
    while (i < src.length && src[i] !== quote && src[i] !== '\n') i += src[i] === '\\' ? 2 : 1;
    i++;
  };
  const skipRegex = () => {
    let inClass = false;
    i++;
    while (i < src.length && src[i] !== '\n') {
      const c = src[i];
      if (c === '\\') i++;
      else if (c === '[') inClass = true;
      else if (c === ']') inClass = false;
      else if (c === '/' && !inClass) break;
      i++;
    }
    i++;
  };
  // A template's text up to its closing backquote; `${...}` inside is code again.
  const skipTemplate = () => {
    i++;
    while (i < src.length && src[i] !== '`') {
      if (src[i] === '\\') i++;
      else if (src[i] === '\n') line++;
      else if (src[i] === '$' && src[i + 1] === '{') {
        i += 2;
        code(true);
        continue;
      }
      i++;
    }
    i++;
  };
  // Code up to the end, or (inside a template's `${`) up to its matching `}`.
  const code = (inTemplate: boolean) => {
    let depth = 0;
    while (i < src.length) {
      const c = src[i];
      const next = src[i + 1];
      if (c === '\n') {
        line++;
        i++;
      } else if (c === '/' && next === '/') {
        const end = src.indexOf('\n', i);
        const stop = end < 0 ? src.length : end;
        out.push({ line, text: src.slice(i + 2, stop) });
        i = stop;
      } else if (c === '/' && next === '*') {
        const end = src.indexOf('*/', i + 2);
        const stop = end < 0 ? src.length : end;
        const body = src.slice(i + 2, stop);
        emit(out, line, body);
        line += countLines(body);
        i = stop + 2;
      } else if (c === '"' || c === "'") {
        skipQuoted(c);
        lastChar = c;
      } else if (c === '`') {
        if (js) skipTemplate();
        else {
          const end = src.indexOf('`', i + 1);
          const stop = end < 0 ? src.length : end;
          line += countLines(src.slice(i, stop));
          i = stop + 1;
        }
        lastChar = c;
      } else if (js && c === '/' && (lastChar === '' || '(,=:[!&|?{};+-*%<>~^'.includes(lastChar) || BEFORE_REGEX.has(lastWord))) {
        skipRegex();
        lastChar = '/';
        lastWord = '';
      } else if (/\s/.test(c)) {
        i++;
      } else if (/[\w$]/.test(c)) {
        WORD.lastIndex = i;
        const word = WORD.exec(src)![0];
        lastWord = word;
        lastChar = 'a';
        i += word.length;
      } else {
        if (inTemplate && c === '}' && depth === 0) {
          i++;
          return;
        }
        if (c === '{') depth++;
        if (c === '}') depth--;
        lastChar = c;
        lastWord = '';
        i++;
      }
    }
  };
  code(false);
  return out;
}

/** Python's `#` comments and triple-quoted strings (docstrings). */
function pythonComments(src: string): CommentLine[] {
  const out: CommentLine[] = [];
  let i = 0;
  let line = 1;
  while (i < src.length) {
    const c = src[i];
    if (c === '\n') {
      line++;
      i++;
    } else if (c === '#') {
      const end = src.indexOf('\n', i);
      const stop = end < 0 ? src.length : end;
      out.push({ line, text: src.slice(i + 1, stop) });
      i = stop;
    } else if ((c === '"' || c === "'") && src.startsWith(c.repeat(3), i)) {
      let j = i + 3;
      while (j < src.length && !src.startsWith(c.repeat(3), j)) j += src[j] === '\\' ? 2 : 1;
      const body = src.slice(i + 3, j);
      emit(out, line, body);
      line += countLines(body);
      i = j + 3;
    } else if (c === '"' || c === "'") {
      i++;
      while (i < src.length && src[i] !== c && src[i] !== '\n') i += src[i] === '\\' ? 2 : 1;
      i++;
    } else i++;
  }
  return out;
}

/** `#` comments of shell scripts, Dockerfiles, YAML and TOML: a `#` at a line's start or after a space, outside quotes. */
function hashComments(src: string): CommentLine[] {
  const out: CommentLine[] = [];
  src.split('\n').forEach((text, n) => {
    let quote = '';
    for (let i = 0; i < text.length; i++) {
      const c = text[i];
      if (quote) {
        if (c === '\\' && quote === '"') i++;
        else if (c === quote) quote = '';
      } else if (c === '"' || c === "'") quote = c;
      else if (c === '#' && (i === 0 || /\s/.test(text[i - 1]))) {
        out.push({ line: n + 1, text: text.slice(i + 1) });
        return;
      }
    }
  });
  return out;
}
