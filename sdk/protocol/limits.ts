/**
 * Sizes the gateway refuses frames beyond (its frame schemas), and that the worker SDK therefore
 * cuts its own frames to. Both read them here, so a change reaches both ends at once.
 */

/** The WebSocket payload limit of the gateway's worker socket. */
export const MAX_FRAME_BYTES = 1024 * 1024;
/** `log.line`, in UTF-16 units. */
export const MAX_LOG_LINE = 10_000;
/** `output.delta`, in UTF-16 units. */
export const MAX_OUTPUT_DELTA = 100_000;
/** `progress.message`, in UTF-16 units. */
export const MAX_PROGRESS_MESSAGE = 1_000;
/** `fail.error.message`, in UTF-16 units. */
export const MAX_ERROR_MESSAGE = 2_000;
/** Lease ids in one `heartbeat`. */
export const MAX_HEARTBEAT_LEASES = 64;
