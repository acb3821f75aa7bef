/**
 * `--command "prog args"` as an argv, without a shell: words split at unquoted whitespace, with
 * POSIX-like quoting (single quotes keep everything, double quotes keep all but `\"` and `\\`, a
 * backslash outside quotes escapes the next character). No globbing, variables or pipes: what
 * runs is exactly the words written, so a job's input can never reach a shell.
 */
export class CommandLineError extends Error {
  override readonly name = 'CommandLineError';
}

export function splitCommandLine(line: string): string[] {
  const words: string[] = [];
  let word = '';
  let inWord = false;
  let quote: "'" | '"' | null = null;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quote === "'") {
      if (c === "'") quote = null;
      else word += c;
    } else if (quote === '"') {
      if (c === '"') quote = null;
      else if (c === '\\' && (line[i + 1] === '"' || line[i + 1] === '\\')) word += line[++i];
      else word += c;
    } else if (c === "'" || c === '"') {
      quote = c;
      inWord = true;
    } else if (c === '\\') {
      if (i + 1 >= line.length) throw new CommandLineError('the command ends with a lone backslash');
      word += line[++i];
      inWord = true;
    } else if (/\s/.test(c)) {
      if (inWord) words.push(word);
      word = '';
      inWord = false;
    } else {
      word += c;
      inWord = true;
    }
  }
  if (quote) throw new CommandLineError(`the command has an unclosed ${quote === '"' ? 'double' : 'single'} quote`);
  if (inWord) words.push(word);
  if (words.length === 0) throw new CommandLineError('the command is empty');
  return words;
}
