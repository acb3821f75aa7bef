export type OutboundErrorCode =
  | 'url_blocked'
  | 'invalid_url'
  | 'timeout'
  | 'connect_failed'
  | 'tls_failed'
  | 'response_too_large'
  | 'aborted';

/** Why an outbound call failed. Statuses the receiver answered with are not errors. */
export class OutboundError extends Error {
  constructor(
    readonly code: OutboundErrorCode,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'OutboundError';
  }
}
