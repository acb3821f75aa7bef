/** Where the worker SDK writes what it does. Any logger with these four methods fits (pino, winston, console wrappers). */
export interface WorkerLogger {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'silent';

const RANK: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };

function render(fields: Record<string, unknown> | undefined): string {
  if (!fields) return '';
  const parts = Object.entries(fields)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${k}=${typeof v === 'string' ? (/[\s"=]/.test(v) ? JSON.stringify(v) : v) : v instanceof Error ? JSON.stringify(v.message) : JSON.stringify(v)}`);
  return parts.length ? ` ${parts.join(' ')}` : '';
}

/**
 * One line per message on stderr (`2024-05-01T10:00:00.000Z WARN message key=value`), at
 * `level` and above.
 */
export function consoleLogger(level: LogLevel = 'info', write: (line: string) => void = (line) => process.stderr.write(`${line}\n`)): WorkerLogger {
  const at = (l: Exclude<LogLevel, 'silent'>) => (message: string, fields?: Record<string, unknown>) => {
    if (RANK[l] >= RANK[level]) write(`${new Date().toISOString()} ${l.toUpperCase()} ${message}${render(fields)}`);
  };
  return { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

/** A logger that drops everything. */
export const silentLogger: WorkerLogger = consoleLogger('silent');
