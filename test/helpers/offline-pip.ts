import { spawn } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

/**
 * pip as a user without a reachable package index runs it: the documented `pip install ...`
 * from a venv, with the index pointed at a server of this helper that counts each connection and
 * closes it unanswered (so a build that fetches anything fails, after pip's retries, and the
 * count shows it tried), no cache, and none of this machine's pip settings (PIP_FIND_LINKS, a
 * pip.conf) that could supply a package the index would have.
 */
export class OfflinePip {
  connections = 0;
  private server = net.createServer((socket) => {
    this.connections++;
    socket.destroy();
  });
  private url = '';

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as net.AddressInfo).port}/simple/`;
    return this;
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  /** The venv's `pip` with these arguments, from cwd; its exit code and output. */
  pip(venv: string, args: string[], cwd: string): Promise<{ code: number; output: string }> {
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('PIP_')));
    Object.assign(env, {
      PIP_INDEX_URL: this.url,
      // Empty settings here override the machine's pip.conf files (pip reads the global ones
      // even with PIP_CONFIG_FILE set, and it skips only the user's).
      PIP_EXTRA_INDEX_URL: '',
      PIP_FIND_LINKS: '',
      PIP_NO_CACHE_DIR: '1',
      PIP_CONFIG_FILE: os.devNull,
      PIP_DISABLE_PIP_VERSION_CHECK: '1',
      // No __pycache__ left beside the in-tree build backend in the checkout.
      PYTHONDONTWRITEBYTECODE: '1',
    });
    return new Promise((resolve) => {
      const child = spawn(path.join(venv, 'bin', 'pip'), args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
      let output = '';
      child.stdout.on('data', (d) => (output += d));
      child.stderr.on('data', (d) => (output += d));
      child.on('error', (err) => resolve({ code: -1, output: `${output}${err.message}` }));
      child.on('close', (code) => resolve({ code: code ?? -1, output }));
    });
  }
}

/**
 * What pip prints when it reached for the index: none of it may appear in an offline install
 * (pip names the index it would look in, "Looking in indexes:", whether it uses it or not).
 */
export const INDEX_ATTEMPT = /Retrying|NewConnectionError|Connection (refused|reset|aborted)|Could not fetch|No matching distribution/;

/** Every file and folder under dir with its size and modification time: what to compare to tell that nothing was written there. */
export function treeOf(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .sort()
    .map((f) => {
      const st = statSync(path.join(dir, f));
      return `${f} ${st.size} ${st.mtimeMs}`;
    });
}
