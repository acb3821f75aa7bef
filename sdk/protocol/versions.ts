/**
 * The worker protocol versions (docs/worker-protocol.md). One list for both ends: the SDK offers
 * it in `register` and the gateway picks the highest version it shares, so the two cannot drift.
 */
export const PROTOCOL_VERSIONS = [1, 2, 3, 4] as const;

export type ProtocolVersion = (typeof PROTOCOL_VERSIONS)[number];

/** The first version with `reconnect` and `resume`: leases survive a move to another instance. */
export const HANDOVER_PROTOCOL = 2;

/** The first version with `models` in `register` and the `models` frame: jobs route by model. */
export const MODELS_PROTOCOL = 3;

/** The first version whose `ack` may answer several `output` frames of a lease at once (`count`). */
export const BATCH_ACK_PROTOCOL = 4;

/** The first version whose `output` frames carry a per-lease `seq` the gateway dedupes by. */
export const DELTA_SEQ_PROTOCOL = 4;
