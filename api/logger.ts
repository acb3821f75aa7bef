import { pino, type Logger } from 'pino';

/** Structured JSON logs; credentials are redacted wherever they might appear. */
export function createLogger(level: string): Logger {
  return pino({
    level,
    base: { service: 'switchyard' },
    redact: {
      paths: ['req.headers.authorization', 'req.headers["x-service-key"]', '*.api_key', '*.key', '*.worker_token', '*.token'],
      censor: '[redacted]',
    },
  });
}
