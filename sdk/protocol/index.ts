/**
 * The wire contract between the gateway and its workers (docs/worker-protocol.md): protocol
 * versions, frame types and limits, and the URLs both ends build or read. The gateway
 * (dispatch/, api/) and the worker SDK (sdk/worker/) import it; it imports no server code.
 */
export { PROTOCOL_VERSIONS, HANDOVER_PROTOCOL, MODELS_PROTOCOL, BATCH_ACK_PROTOCOL, DELTA_SEQ_PROTOCOL, IDENTITY_PROTOCOL, BACKEND_STATE_PROTOCOL, RANKS_PROTOCOL, USAGE_PROTOCOL, SUPERSEDED_CLOSE, SUPERSEDED_CODE, type ProtocolVersion } from './versions.js';
export { WORKER_PATH, workerSocketUrl } from './worker-url.js';
export { artifactUrl, parseArtifactUrl, leaseUploadUrl, leaseFileUrl, type ArtifactRef } from './artifact-url.js';
export {
  PIPELINE_FRAME_MAGIC,
  PIPELINE_FRAME_VERSION,
  PIPELINE_HEADER_BYTES,
  MAX_PIPELINE_PAYLOAD,
  PipelineFrameError,
  encodePipelineFrame,
  decodePipelineFrame,
  writePipelineHeader,
  isPipelineLeaseId,
  type PipelineFrame,
} from './pipeline-frame.js';
export {
  MAX_FRAME_BYTES,
  MAX_LOG_LINE,
  MAX_OUTPUT_DELTA,
  MAX_PROGRESS_MESSAGE,
  MAX_ERROR_MESSAGE,
  MAX_HEARTBEAT_LEASES,
  MAX_WORKER_MODELS,
  MODEL_ID_PATTERN,
  MAX_MODEL_SCHEMA_BYTES,
  MAX_MODEL_DESCRIPTION,
  WORKER_IDENTITY_PATTERN,
  MAX_BACKEND_MESSAGE,
  MAX_RANKS,
} from './limits.js';
export type {
  Tier,
  LeaseRef,
  ResumeClaim,
  ModelRank,
  WorkerModel,
  WorkerModels,
  RegisterFrame,
  ModelsFrame,
  AttestationFrame,
  HeartbeatFrame,
  BackendFrame,
  FailureReport,
  ProgressFrame,
  LogFrame,
  OutputFrame,
  CompleteFrame,
  WorkUsage,
  FailFrame,
  LeaseReport,
  WorkerFrame,
  Unaddressed,
  RegisteredInfo,
  RegisteredFrame,
  LeaseInfo,
  LeaseInputFile,
  LeaseRank,
  LeaseFrame,
  CancelFrame,
  AttestFrame,
  AttestedFrame,
  ReconnectFrame,
  DrainFrame,
  ModelsAcceptedFrame,
  AckFrame,
  ErrorFrame,
  GatewayFrame,
} from './worker-frames.js';
