/**
 * The Switchyard client library: submit jobs, follow them by polling or SSE, read
 * capabilities and capacity, upload files, manage tools and bots. Node 20+ and browsers; no server code.
 * See README.md ("Client library").
 */
export { SwitchyardClient, type GetJobOptions, type SwitchyardClientOptions } from './switchyard-client.js';
export { BatchEventStream, JobEventStream } from './sse-stream.js';
export type { Batch, BatchCanceled, BatchEvent, BatchSubmitted } from './batch-types.js';
export { SwitchyardFiles } from './files.js';
export { toJobResult } from './job-result.js';
export type { FetchLike } from './http-transport.js';
export {
  SwitchyardError,
  SwitchyardApiError,
  SwitchyardBadRequestError,
  SwitchyardAuthenticationError,
  SwitchyardInsufficientCreditsError,
  SwitchyardNotFoundError,
  SwitchyardConflictError,
  SwitchyardRateLimitError,
  SwitchyardNetworkError,
  SwitchyardStreamError,
  SwitchyardTimeoutError,
  type SwitchyardErrorCode,
} from './errors.js';
export * from './types.js';
export { RUN_ERROR_CODES, type RunErrorCode } from './run-error-codes.js';
export { verifyAttestation, type JobAttestation, type VerifyAttestationOptions, type VerifiedAttestation } from './verify-attestation.js';
export type { InputFileProof } from './input-file-hashes.js';
export { AttestationError, type AttestationErrorCode } from '../attestation/index.js';
