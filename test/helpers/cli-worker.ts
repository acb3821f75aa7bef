import { spawn } from 'node:child_process';

export interface CliWorkerTarget {
  /** The gateway's http(s) URL. */
  gateway: string;
  /** A worker token (swt_...). */
  token: string;
  env: NodeJS.ProcessEnv;
}

/**
 * Runs `switchyard worker --gateway ... --token ... <args>` until `whileUp` is done, then sends
 * SIGTERM; resolves with its exit code and stderr. A failure of `whileUp` carries the worker's
 * stderr, which is where a CLI worker says why it did not serve.
 */
export async function runCliWorker(target: CliWorkerTarget, args: string[], whileUp: () => Promise<void>): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, ['api/bin/switchyard.mjs', 'worker', '--gateway', target.gateway, '--token', target.token, ...args], { env: target.env, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  try {
    await whileUp();
  } catch (err) {
    (err as Error).message += `\nworker stderr: ${stderr}`;
    throw err;
  } finally {
    child.kill('SIGTERM');
  }
  return { code: await exited, stderr };
}
