/** Why evidence or a receipt was refused; `code` is stable, the message says what to fix. */
export type AttestationErrorCode =
  | 'bad_signature'
  | 'bad_algorithm'
  | 'unknown_key'
  | 'expired'
  | 'wrong_issuer'
  | 'wrong_nonce'
  | 'attestation_failed'
  | 'measurement_failed'
  | 'secure_boot_off'
  | 'debug_enabled'
  | 'version_not_allowed'
  | 'malformed'
  | 'receipt_mismatch'
  | 'artifact_mismatch';

export class AttestationError extends Error {
  constructor(
    readonly code: AttestationErrorCode,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'AttestationError';
  }
}
