import { pino, type DestinationStream, type Logger } from 'pino';

/** Headers that carry credentials, wherever a logged object keeps headers. */
const SECRET_HEADERS = ['authorization', 'cookie', '"set-cookie"', '"x-service-key"'];
/** Fields that hold a credential, at the top of a log line or one object down. */
const SECRET_FIELDS = ['authorization', 'api_key', 'key', 'token', 'worker_token', 'upload_token', 'lock_token', 'secret', 'signing_secret', 'webhook_secret', 'embedToken', 'embed_token', 'password', 'admin_token'];

const REDACTED_PATHS = [
  ...['req.headers', 'headers', '*.headers'].flatMap((at) => SECRET_HEADERS.map((h) => (h.startsWith('"') ? `${at}[${h}]` : `${at}.${h}`))),
  ...SECRET_FIELDS.flatMap((f) => [f, `*.${f}`]),
];

/** Structured JSON logs (on stdout unless given a destination); credentials are redacted wherever they might appear. */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  const options = { level, base: { service: 'switchyard' }, redact: { paths: REDACTED_PATHS, censor: '[redacted]' } };
  return destination ? pino(options, destination) : pino(options);
}
