import { webcrypto } from 'node:crypto';
import type { JWK } from 'jose';
import { eatNonceFor, inputDigest, signReceipt, type Evidence, type ReceiptClaims } from '../attestation/index.js';

/** What a private worker needs (docs/confidentiality.md, "Private"). */
export interface WorkerAttestationOptions {
  /**
   * The key pair receipts are signed with: ECDSA P-384. Generated on the worker when absent,
   * with a private key that cannot be exported, so it never leaves the process.
   */
  receiptKey?: webcrypto.CryptoKeyPair;
  /**
   * Obtains attestation evidence for `eatNonce` from your verifier (NVIDIA's attestation
   * service on a confidential-computing GPU): the overall token and the per-GPU tokens.
   * `eatNonce` binds the gateway's nonce to the receipt key; pass it to the verifier unchanged.
   */
  evidence: (eatNonce: string) => Promise<Evidence>;
}

/**
 * The fields of a receipt the worker knows once its handler and uploads are done: the input it
 * was leased, hashed when signing, or for a rank lease (whose rank never saw the input) the
 * hash the gateway gave with the lease.
 */
export type ReceiptSubject = Omit<ReceiptClaims, 'input_sha256' | 'iat'> & ({ input: unknown } | { input_sha256: string });

function isP384(key: webcrypto.CryptoKey | undefined): boolean {
  const alg = key?.algorithm as webcrypto.EcKeyAlgorithm | undefined;
  return alg?.name === 'ECDSA' && alg.namedCurve === 'P-384';
}

/**
 * A private worker's receipt key and evidence source: the public half goes to the gateway at
 * registration, evidence is fetched for each `attest` nonce, receipts are signed with the
 * private half.
 */
export class ReceiptSigner {
  private keys?: Promise<{ pair: webcrypto.CryptoKeyPair; jwk: JWK }>;

  constructor(private readonly opts: WorkerAttestationOptions) {
    if (!opts || typeof opts.evidence !== 'function') throw new TypeError('attestation.evidence must be a function (eatNonce) => Promise<{token, gpus}>');
    if (opts.receiptKey && !(isP384(opts.receiptKey.privateKey) && isP384(opts.receiptKey.publicKey))) {
      throw new TypeError('attestation.receiptKey must be an ECDSA P-384 key pair (receipts are ES384)');
    }
  }

  /** The public receipt key as a JWK, making the pair on first use. */
  async publicJwk(): Promise<JWK> {
    return (await this.load()).jwk;
  }

  /** Evidence answering a gateway nonce, bound to this worker's receipt key. */
  async evidenceFor(nonce: string): Promise<Evidence> {
    return this.opts.evidence(await eatNonceFor(nonce, await this.publicJwk()));
  }

  /** Signs a receipt over the input and its files as leased and the artifacts as uploaded, now. */
  async sign(subject: ReceiptSubject): Promise<string> {
    const { input, input_sha256, ...rest } = subject as Omit<ReceiptClaims, 'input_sha256' | 'iat'> & { input?: unknown; input_sha256?: string };
    const digest = 'input_sha256' in subject ? input_sha256! : await inputDigest(input, rest.input_files);
    const claims: ReceiptClaims = { ...rest, input_sha256: digest, iat: Math.floor(Date.now() / 1000) };
    return signReceipt((await this.load()).pair.privateKey, claims);
  }

  private load(): Promise<{ pair: webcrypto.CryptoKeyPair; jwk: JWK }> {
    this.keys ??= (async () => {
      const subtle = webcrypto.subtle;
      const pair = this.opts.receiptKey ?? ((await subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-384' }, false, ['sign', 'verify'])) as webcrypto.CryptoKeyPair);
      const { kty, crv, x, y } = (await subtle.exportKey('jwk', pair.publicKey)) as JWK;
      return { pair, jwk: { kty, crv, x, y } };
    })();
    return this.keys;
  }
}
