/**
 * The broadcaster's Ed25519 signing key. The true source signs each segment announcement with the
 * private half; viewers get the public half in `welcome` and the tracker checks announcements too.
 */
import { createPrivateKey, createPublicKey, type KeyObject } from 'node:crypto';
import { readFile } from 'node:fs/promises';

export interface SigningKeys {
  readonly privateKey: CryptoKey;
  readonly publicKey: CryptoKey;
  /** Base64 of the 32-byte raw public key (what `welcome.publicKey` carries). */
  readonly publicKeyBase64: string;
  /** True when no key file was given and this pair lives only as long as the process. */
  readonly ephemeral: boolean;
}

export class KeyError extends Error {
  override readonly name = 'KeyError';
}

const ED25519 = { name: 'Ed25519' } as const;

/** Reads a PKCS8 PEM Ed25519 private key (as `openssl genpkey -algorithm ed25519` writes it). */
export async function loadSigningKeys(file: string): Promise<SigningKeys> {
  let pem: string;
  try {
    pem = await readFile(file, 'utf8');
  } catch (e) {
    throw new KeyError(`--signing-key: cannot read ${file}: ${errorMessage(e)}`);
  }
  let key: KeyObject;
  try {
    key = createPrivateKey({ key: pem, format: 'pem' });
  } catch (e) {
    throw new KeyError(`--signing-key: ${file} is not a PEM private key: ${errorMessage(e)}`);
  }
  if (key.asymmetricKeyType !== 'ed25519')
    throw new KeyError(
      `--signing-key: ${file} holds a ${key.asymmetricKeyType ?? 'non-asymmetric'} key; an Ed25519 key is needed`,
    );
  const pkcs8 = key.export({ format: 'der', type: 'pkcs8' });
  const spki = createPublicKey(key).export({ format: 'der', type: 'spki' });
  // Not extractable: nothing after loading needs the private bytes again.
  const privateKey = await crypto.subtle.importKey('pkcs8', pkcs8, ED25519, false, ['sign']);
  const publicKey = await crypto.subtle.importKey('spki', spki, ED25519, true, ['verify']);
  return { privateKey, publicKey, publicKeyBase64: await rawPublicKeyBase64(publicKey), ephemeral: false };
}

/** A fresh pair for a run without a key file; viewers of this run trust the key `welcome` gives them. */
export async function generateSigningKeys(): Promise<SigningKeys> {
  const pair = await crypto.subtle.generateKey(ED25519, true, ['sign', 'verify']);
  return {
    privateKey: pair.privateKey,
    publicKey: pair.publicKey,
    publicKeyBase64: await rawPublicKeyBase64(pair.publicKey),
    ephemeral: true,
  };
}

export async function rawPublicKeyBase64(publicKey: CryptoKey): Promise<string> {
  return Buffer.from(await crypto.subtle.exportKey('raw', publicKey)).toString('base64');
}

/** A raw Ed25519 public key (RFC 8032). */
export const ED25519_PUBLIC_KEY_BYTES = 32;

/** Imports a base64 raw Ed25519 public key for verifying; throws KeyError unless it is 32 bytes. */
export async function importPublicKey(base64: string): Promise<CryptoKey> {
  const raw = Buffer.from(base64, 'base64');
  if (raw.length !== ED25519_PUBLIC_KEY_BYTES || raw.toString('base64') !== base64)
    throw new KeyError('an Ed25519 public key is 32 bytes in base64');
  return crypto.subtle.importKey('raw', raw, ED25519, true, ['verify']);
}

function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
