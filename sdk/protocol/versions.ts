/**
 * The worker protocol versions (docs/worker-protocol.md). One list for both ends: the SDK offers
 * it in `register` and the gateway picks the highest version it shares, so the two cannot drift.
 */
export const PROTOCOL_VERSIONS = [1, 2, 3, 4, 5, 6, 7] as const;

export type ProtocolVersion = (typeof PROTOCOL_VERSIONS)[number];

/** The first version with `reconnect` and `resume`: leases survive a move to another instance. */
export const HANDOVER_PROTOCOL = 2;

/** The first version with `models` in `register` and the `models` frame: jobs route by model. */
export const MODELS_PROTOCOL = 3;

/** The first version whose `ack` may answer several `output` frames of a lease at once (`count`). */
export const BATCH_ACK_PROTOCOL = 4;

/** The first version whose `output` frames carry a per-lease `seq` the gateway dedupes by. */
export const DELTA_SEQ_PROTOCOL = 4;

/**
 * The first version with `identity` in `register` (a worker registering again retires its old
 * connection at once, on every instance) and the `backend` frame (a worker whose inference
 * server is down takes no leases until it answers again).
 */
export const IDENTITY_PROTOCOL = 5;
export const BACKEND_STATE_PROTOCOL = 5;

/**
 * The first version whose models may carry `rank` (`{index, count}`): the worker serves one
 * pipeline stage of a model split into `count` ranks, not the whole model (docs/ranks.md).
 */
export const RANKS_PROTOCOL = 6;

/**
 * The first version whose `complete` may carry `usage` (tokens, seconds, images): what the run
 * is charged for when its kind has a per-unit price (docs/jobs.md, "Cost"). An older gateway
 * refuses the field, so the SDK sends it only from this version on.
 */
export const USAGE_PROTOCOL = 7;

/**
 * The close code (and `error` code) of a connection retired because the same worker identity
 * registered again, here or on another instance. A worker hearing it on its current socket has
 * a twin: another live process registered with its identity, so it stops rather than fight it.
 */
export const SUPERSEDED_CLOSE = 4409;
export const SUPERSEDED_CODE = 'superseded';
