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
/** Models one worker may list, over all its kinds. */
export const MAX_WORKER_MODELS = 256;
/** A model id: letters, digits and `._:/@+-`, starting with a letter or digit, 1-200 long. */
export const MODEL_ID_PATTERN = '^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}$';
/** A model's input schema, as JSON. */
export const MAX_MODEL_SCHEMA_BYTES = 64 * 1024;
/** A model's description, in UTF-16 units. */
export const MAX_MODEL_DESCRIPTION = 1_000;
/** A worker identity (`register.identity`): letters, digits and `._:-`, starting with a letter or digit, 1-128 long. */
export const WORKER_IDENTITY_PATTERN = '^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$';
/** `backend.message`, in UTF-16 units. */
export const MAX_BACKEND_MESSAGE = 1_000;
/** The most ranks (pipeline stages) a model may be split into: a worker's `rank.count`, a catalogue entry's `ranks`. */
export const MAX_RANKS = 64;
