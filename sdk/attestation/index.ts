/**
 * Attestation of private workers and receipts of private runs (docs/confidentiality.md):
 * shared by the gateway (checks), workers (binding, receipts, demo evidence) and the client
 * library (verifyAttestation). Node 20+ and browsers.
 */
export { canonicalJson, inputDigest, receiptInput, sha256Hex } from './digest.js';
export { AttestationError, type AttestationErrorCode } from './errors.js';
export { eatNonceFor, verifyEvidence, type Evidence, type EvidencePolicy, type VerifiedEvidence } from './evidence.js';
export { RECEIPT_TYP, signReceipt, verifyReceipt, type ReceiptClaims } from './receipt.js';
export { createTestEvidence, type TestEvidenceOptions, type TestGpu } from './test-evidence.js';
