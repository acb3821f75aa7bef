import { loadConfig } from '../../api/main/config.js';
import { Gateway } from '../../api/composition/gateway.js';

/**
 * The real gateway, configured from the environment exactly as `switchyard serve` would be
 * (the parent sets PORT=0, REDIS_PREFIX, ADMIN_TOKEN, LOG_LEVEL, RATE_LIMIT_PER_SEC, RATE_LIMIT_BURST): the limiter runs, with a limit the load never reaches.
 * Prints {"url"} once listening; SIGTERM stops it cleanly and exits.
 */
const gateway = new Gateway({ config: loadConfig(process.env) });
const { url } = await gateway.start();
process.stdout.write(`${JSON.stringify({ url })}\n`);

process.once('SIGTERM', () => {
  void gateway
    .stop()
    .catch((err) => console.error('gateway-server: unclean stop', err))
    .finally(() => process.exit(0));
});
