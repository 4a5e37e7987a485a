/** The broadcaster key is compared as digests: equal lengths for timingSafeEqual whatever was sent. */
import { createHash } from 'node:crypto';

export function sha256(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}
