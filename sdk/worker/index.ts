/**
 * The Switchyard worker SDK: wrap your own model as a worker of a Switchyard gateway.
 * See README.md ("Running a worker") and docs/worker-protocol.md.
 */
export { SwitchyardWorker } from './switchyard-worker.js';
export { SDK_VERSION, type SwitchyardWorkerOptions, type WorkerHandler, type KindHandler, type ReconnectOptions, type BackendWatchOptions, type BackendProbe } from './worker-options.js';
export { WorkerRefusedError, type SwitchyardWorkerEvents, type DisconnectInfo, type GatewayErrorFrame } from './worker-events.js';
export { workerSocketUrl, PROTOCOL_VERSIONS, WORKER_PATH, type Tier, type LeaseInfo, type LeaseInputFile, type RegisteredInfo, type FailureReport, type WorkerModel, type WorkerModels, type LeaseRank, type ModelRank, MAX_PIPELINE_PAYLOAD } from '../protocol/index.js';
export { uploadArtifact, UploadError, type UploadedArtifact, type UploadOptions } from './upload.js';
export { InputFileError, type InputFileOptions } from './input-files.js';
export { ReceiptSigner, type WorkerAttestationOptions } from './attestation.js';
export type { Evidence } from '../attestation/index.js';
export { consoleLogger, silentLogger, type WorkerLogger, type LogLevel } from './logger.js';
export type { Engine, EngineArtifact, EngineContext, EngineResult, InputFile, RankContext } from '../engines/types.js';
