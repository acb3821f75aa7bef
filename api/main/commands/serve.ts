import type { Config } from '../config.js';
import { Gateway } from '../../composition/gateway.js';
import { tolerateOutageRejections } from './outage-rejections.js';

export interface ServeHooks {
  onReady?: (gw: Gateway, url: string) => Promise<void>;
  /** Runs first on SIGTERM/SIGINT, while the gateway still serves. */
  beforeStop?: () => Promise<void>;
  /** Runs last, after the gateway stopped. */
  cleanup?: () => void;
}

/** `switchyard serve` (and the gateway of `dev`): runs until SIGTERM/SIGINT, then stops gracefully. */
export async function serve(config: Config, hooks: ServeHooks = {}): Promise<void> {
  const gateway = new Gateway({ config });
  // Handlers first: a supervisor's SIGTERM during start-up also stops the gateway cleanly,
  // once what has started can be stopped.
  let started: Promise<unknown> = Promise.resolve();
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) {
      // A second signal: the operator does not want to wait. What is in flight is recovered
      // as after a crash (leases lapse and are requeued, the reconciler enqueues).
      gateway.log.warn({ signal }, 'second signal: exiting without finishing the shutdown');
      process.exit(1);
    }
    stopping = true;
    gateway.log.info({ signal }, 'shutting down');
    await started.catch(() => {});
    await hooks.beforeStop?.().catch((err) => gateway.log.error({ err }, 'unclean shutdown'));
    await gateway.stop().catch((err) => gateway.log.error({ err }, 'unclean shutdown'));
    hooks.cleanup?.();
    process.exit(0);
  };
  process.on('unhandledRejection', tolerateOutageRejections(gateway.log));
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
  const starting = gateway.start();
  started = starting;
  let url: string;
  try {
    ({ url } = await starting);
  } catch (err) {
    // Stopped while starting: the stop under way ends the process (exit 0), not this failure.
    if (stopping) return;
    throw err;
  }
  if (stopping) return;
  await hooks.onReady?.(gateway, url);
}
