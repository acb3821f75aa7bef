import { accessSync, constants } from 'node:fs';
import path from 'node:path';

/** A program a preset runs, and how to get it where it is missing. */
export interface LocalProgram {
  name: string;
  /** The Debian command that installs it. */
  install: string;
}

export const ESPEAK_NG: LocalProgram = { name: 'espeak-ng', install: 'apt-get install -y espeak-ng' };
/** Debian's pocketsphinx 0.8 CLI; the en-us model is a package of its own. */
export const POCKETSPHINX: LocalProgram = { name: 'pocketsphinx_continuous', install: 'apt-get install -y pocketsphinx pocketsphinx-en-us' };
export const FFMPEG: LocalProgram = { name: 'ffmpeg', install: 'apt-get install -y ffmpeg' };

/** The program's path on PATH, or null. */
export function findOnPath(name: string, env: NodeJS.ProcessEnv = process.env): string | null {
  if (name.includes('/')) return isExecutable(name) ? name : null;
  for (const dir of (env.PATH ?? '').split(path.delimiter)) {
    if (dir && isExecutable(path.join(dir, name))) return path.join(dir, name);
  }
  return null;
}

/** Whether this process may run the file. */
export function isExecutable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}
