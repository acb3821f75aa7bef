/**
 * The Switchyard worker SDK: wrap your own model as a worker of a Switchyard gateway.
 * See README.md ("Running a worker") and docs/worker-protocol.md.
 */
export {
  SwitchyardWorker,
  WorkerRefusedError,
  workerSocketUrl,
  SDK_VERSION,
  PROTOCOL_VERSIONS,
  WORKER_PATH,
  type SwitchyardWorkerOptions,
  type SwitchyardWorkerEvents,
  type WorkerHandler,
  type KindHandler,
  type Tier,
  type LeaseInfo,
  type RegisteredInfo,
  type FailureReport,
  type DisconnectInfo,
  type GatewayErrorFrame,
  type ReconnectOptions,
} from './switchyard-worker.js';
export { uploadArtifact, UploadError, type UploadedArtifact, type UploadOptions } from './upload.js';
export { ReceiptSigner, type WorkerAttestationOptions } from './attestation.js';
export type { Evidence } from '../attestation/index.js';
export { consoleLogger, silentLogger, type WorkerLogger, type LogLevel } from './logger.js';
export type { Engine, EngineArtifact, EngineContext, EngineResult } from '../engines/types.js';
