import { MAX_RANKS } from '../../sdk/protocol/limits.js';

/**
 * The job view's `attestation` (docs/confidentiality.md, "Receipts and verification"): what a
 * private run that succeeded carries for the caller to check with the client library. Open to
 * further fields (`additionalProperties`), as a verifier ignores what it does not check.
 */

const evidenceUrl = {
  type: 'string',
  format: 'uri',
  description: "GET it (account key) for the worker's current evidence while it is connected and attested; 404 after",
} as const;

export const jobAttestation = {
  type: 'object',
  additionalProperties: true,
  required: ['tier', 'worker_id', 'nonce', 'receipt_key', 'evidence', 'receipt'],
  properties: {
    tier: { const: 'private' },
    worker_id: { type: 'string', description: 'The worker that signed the receipt: for a ranked run, its last rank' },
    nonce: { type: 'string', description: 'The gateway nonce the evidence answers' },
    receipt_key: { type: 'object', additionalProperties: true, description: "The worker's public receipt key (JWK)" },
    evidence: {
      type: 'object',
      additionalProperties: true,
      required: ['token', 'gpus'],
      properties: { token: { type: 'string' }, gpus: { type: 'object', additionalProperties: { type: 'string' } } },
      description: "The verifier's tokens, as the worker presented them",
    },
    receipt: { type: 'string', description: "The worker's receipt: a compact JWS (ES384)" },
    evidence_url: evidenceUrl,
    verified_at: { type: 'string', format: 'date-time', description: 'When the gateway checked the receipt against this evidence' },
    ranks: {
      type: 'array',
      minItems: 2,
      maxItems: MAX_RANKS,
      description:
        "A ranked run's: the worker of each rank of its pipeline, rank 0 first, as the receipt signs them; the last is `worker_id`. Only the last rank signs; the gateway placed only attested private workers on the others. Absent for a run leased whole.",
      items: {
        type: 'object',
        required: ['rank', 'worker_id', 'evidence_url'],
        properties: { rank: { type: 'integer', minimum: 0 }, worker_id: { type: 'string' }, evidence_url: evidenceUrl },
      },
    },
  },
} as const;
