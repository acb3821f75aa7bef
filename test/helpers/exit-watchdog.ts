import { Socket } from 'node:net';

/**
 * Mocha root hook plugin (.mocharc.json `require`): once every test has run, the process must be
 * able to exit. A test that leaks a socket, server or timer would otherwise keep `npm test`
 * waiting forever after its summary, which a CI only reports as a timeout. The timer below is
 * unref'd, so it fires only if something else still holds the process open; it then names what
 * does and exits non-zero.
 */
const GRACE_MS = 15_000;

export function mochaGlobalTeardown(): void {
  setTimeout(() => {
    // The process's own stdio shows up as TTYWrap or PipeWrap; it holds nothing open.
    const open = process.getActiveResourcesInfo().filter((r) => r !== 'TTYWrap' && r !== 'PipeWrap');
    const sockets = (process as unknown as { _getActiveHandles(): unknown[] })
      ._getActiveHandles()
      .filter((h): h is Socket => h instanceof Socket && h.remotePort !== undefined)
      .map((s) => `${s.localPort} -> ${s.remoteAddress}:${s.remotePort}`);
    process.stderr.write(
      `\ntest run: the process is still held open ${GRACE_MS / 1000} s after the last test by: ${open.join(', ') || '(nothing named)'}` +
        `${sockets.length ? ` (sockets ${sockets.join(', ')})` : ''}; a test leaked it\n`,
    );
    // Mocha's own exit handler sets the exit code to the number of failures; this one runs after it.
    process.on('exit', () => {
      process.exitCode = 3;
    });
    process.exit(3);
  }, GRACE_MS).unref();
}
