import { ApiError, NotFoundError } from '../../../models/errors.js';
import type { RouteSpec } from '../route-spec.js';
import type { AttestationService } from '../../../dispatch/attestation/attestation-service.js';

const isoTime = { type: 'string', format: 'date-time' } as const;

/** A private worker's current evidence, as the gateway verified it (docs/confidentiality.md). */
export const workerAttestation = {
  type: 'object',
  required: ['worker_id', 'receipt_key', 'evidence', 'gpus', 'verified_at', 'expires_at'],
  properties: {
    worker_id: { type: 'string' },
    receipt_key: { type: 'object', additionalProperties: true, description: "The worker's EC P-384 public JWK that its receipts verify with; the evidence's eat_nonce binds it" },
    nonce: { type: 'string', description: 'The gateway nonce the evidence answers: eat_nonce = sha256(nonce "." JWK thumbprint of receipt_key)' },
    evidence: {
      type: 'object',
      required: ['token', 'gpus'],
      description: "The verifier's overall attestation token (a JWT) and one token per GPU, as the worker presented them",
      properties: { token: { type: 'string' }, gpus: { type: 'object', additionalProperties: { type: 'string' } } },
    },
    gpus: {
      type: 'array',
      items: {
        type: 'object',
        properties: { name: { type: 'string' }, driverVersion: { type: 'string' }, vbiosVersion: { type: 'string' }, model: { type: ['string', 'null'] } },
      },
    },
    verified_at: isoTime,
    expires_at: { ...isoTime, description: 'When the earliest token of the evidence expires; the worker gets no private lease after it unless it presents fresh evidence' },
  },
} as const;

/** The verifier's key set the gateway trusts, with what it checks evidence against. */
export const verifierKeys = {
  type: 'object',
  required: ['issuer', 'keys', 'driver_versions', 'vbios_versions'],
  properties: {
    issuer: { type: 'string', description: 'The `iss` every evidence token must carry (ATTESTATION_ISSUER)' },
    keys: { type: 'array', items: { type: 'object', additionalProperties: true }, description: "The verifier's public JWKs (ATTESTATION_JWKS): the answer is itself a JWKS" },
    driver_versions: { type: 'array', items: { type: 'string' }, description: 'Allowed GPU driver versions; empty: any' },
    vbios_versions: { type: 'array', items: { type: 'string' }, description: 'Allowed VBIOS versions; empty: any' },
  },
} as const;

export interface AttestationRoutesOptions {
  /** Private workers' current evidence, as the gateway verified it, and the verifier's keys. */
  attestation: Pick<AttestationService, 'current' | 'verifierKeys'>;
}

export function attestationRoutes({ attestation }: AttestationRoutesOptions): RouteSpec[] {
  return [
    {
      method: 'get',
      path: '/v1/attestation/workers/{worker_id}',
      operationId: 'getWorkerAttestation',
      summary: "A private worker's current attestation evidence, for audits (a private run's evidence_url)",
      tag: 'fleet',
      auth: 'account',
      responses: {
        200: { description: 'The evidence the gateway verified and holds as current', schema: workerAttestation },
        404: { description: 'The worker is not connected, not private, or its evidence has lapsed' },
      },
      async handler(ctx) {
        const id = ctx.params.worker_id;
        const current = /^wkr_[0-9A-Za-z]{1,64}$/.test(id) ? await attestation.current(id) : null;
        if (!current) throw new NotFoundError('current attestation evidence of this worker');
        ctx.body = current;
      },
    },
    {
      method: 'get',
      path: '/v1/attestation/verifier-keys',
      operationId: 'getVerifierKeys',
      summary: "The attestation verifier's keys this gateway trusts (a JWKS) and the issuer it expects, for checking private runs where the verifier's own key set cannot be fetched (the console)",
      tag: 'fleet',
      auth: 'account',
      responses: {
        200: { description: 'The key set (ATTESTATION_JWKS: the file, or the URL as fetched) and the issuer, driver and VBIOS lists evidence is checked against', schema: verifierKeys },
        404: { description: 'The private tier is off: no ATTESTATION_JWKS' },
        503: { description: 'ATTESTATION_JWKS is a URL that could not be fetched just now' },
      },
      async handler(ctx) {
        let keys: Awaited<ReturnType<AttestationService['verifierKeys']>>;
        try {
          keys = await attestation.verifierKeys();
        } catch (err) {
          throw new ApiError('unavailable', `the attestation verifier's key set could not be fetched: ${(err as Error).message}`, { cause: err, headers: { 'retry-after': '30' } });
        }
        if (!keys) throw new NotFoundError("this gateway's attestation verifier keys (the private tier is off)");
        ctx.body = keys;
      },
    },
  ];
}
