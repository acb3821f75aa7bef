import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';

const VERSION = 'v1';
const IV_BYTES = 12;

/** Why a sealed secret cannot be opened: another key sealed it, or its bytes fail authentication. */
export class SecretUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SecretUnavailableError';
  }
}

/**
 * Seals tool secrets at rest with AES-256-GCM under TOOL_SECRET_KEY (or the key the gateway keeps
 * under DATA_DIR when it is unset: tool-secret-key.ts), so there is always a key.
 *
 * @remarks
 * A sealed value reads `v1.<key id>.<iv>.<tag>.<ciphertext>` (base64url parts): a random 12-byte
 * IV per value, the 16-byte authentication tag, and a key id (the first 8 hex digits of the
 * key's sha256), so a later rotation can tell which key opens which value. `context` (the tool id
 * and the secret's role) is bound in as additional authenticated data, so a sealed value copied
 * onto another tool or into another field no longer opens.
 */
export class SecretBox {
  /** The first 8 hex digits of the key's sha256: names the key in sealed values and errors, reveals nothing of it. */
  readonly keyId: string;

  constructor(private readonly key: Buffer) {
    if (key.length !== 32) throw new Error('the tool secret key must be 32 bytes');
    this.keyId = createHash('sha256').update(key).digest('hex').slice(0, 8);
  }

  seal(plaintext: string, context: string): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv).setAAD(Buffer.from(context));
    const sealed = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return [VERSION, this.keyId, iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), sealed.toString('base64url')].join('.');
  }

  open(sealed: string, context: string): string {
    const [version, keyId, iv, tag, data] = sealed.split('.');
    if (version !== VERSION || data === undefined) throw new SecretUnavailableError('the tool\'s secret is not in a format this gateway reads');
    if (keyId !== this.keyId) throw new SecretUnavailableError(`the tool's secret was encrypted with another TOOL_SECRET_KEY (key id ${keyId}; this gateway's key has id ${this.keyId})`);
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.key, Buffer.from(iv, 'base64url'), { authTagLength: 16 }).setAAD(Buffer.from(context));
      // authTagLength above: a truncated tag is refused, not checked on fewer bytes.
      decipher.setAuthTag(Buffer.from(tag, 'base64url'));
      return Buffer.concat([decipher.update(Buffer.from(data, 'base64url')), decipher.final()]).toString('utf8');
    } catch (err) {
      throw new SecretUnavailableError(`the tool's secret does not authenticate under TOOL_SECRET_KEY: ${(err as Error).message}`);
    }
  }
}
