/**
 * The optional parity slice (issue 4): one XOR packet over each stripe of M data packets (the packets
 * with the same sequence number on every data slice), sent down its own tree like any slice. A member
 * that holds the parity packet and all but one of a stripe rebuilds the missing one locally, with no
 * request and no wait. One loss per stripe is what XOR can undo; the cost is 1/M more upload.
 *
 * Layout: u32 LE length of each data packet, in slice order, then the XOR of the packets, each
 * zero-padded to the longest. An empty parity payload means "parity is off for this stripe": the
 * tree stays alive at the cost of a header.
 */

const LENGTH_BYTES = 4;

export class ParityError extends Error {
  override readonly name = 'ParityError';
}

/** The parity payload over a whole stripe (every data packet present). */
export function encodeParity(stripe: readonly Uint8Array[]): Uint8Array {
  let longest = 0;
  for (const p of stripe) if (p.byteLength > longest) longest = p.byteLength;
  const header = stripe.length * LENGTH_BYTES;
  const out = new Uint8Array(header + longest);
  stripe.forEach((p, i) => {
    const o = i * LENGTH_BYTES;
    const n = p.byteLength;
    out[o] = n & 0xff;
    out[o + 1] = (n >>> 8) & 0xff;
    out[o + 2] = (n >>> 16) & 0xff;
    out[o + 3] = (n >>> 24) & 0xff;
    for (let j = 0; j < n; j++) out[header + j] = (out[header + j] ?? 0) ^ (p[j] ?? 0);
  });
  return out;
}

/**
 * Rebuild the one missing packet of a stripe (`stripe[missing]` is ignored) from the others and the
 * parity payload. A payload that does not fit the stripe (a peer's bad bytes) is a ParityError, never
 * a wrong packet of the wrong length.
 */
export function recoverFromParity(
  parity: Uint8Array,
  stripe: readonly (Uint8Array | undefined)[],
  missing: number,
): Uint8Array {
  const header = stripe.length * LENGTH_BYTES;
  if (parity.byteLength < header)
    throw new ParityError(
      `parity payload of ${parity.byteLength} bytes is shorter than its ${header}-byte header`,
    );
  const bodyBytes = parity.byteLength - header;
  const lengthOf = (i: number): number => {
    const o = i * LENGTH_BYTES;
    return (
      ((parity[o] ?? 0) |
        ((parity[o + 1] ?? 0) << 8) |
        ((parity[o + 2] ?? 0) << 16) |
        ((parity[o + 3] ?? 0) << 24)) >>>
      0
    );
  };
  let longest = 0;
  for (let i = 0; i < stripe.length; i++) {
    const n = lengthOf(i);
    if (n > bodyBytes)
      throw new ParityError(`packet ${i} is said to have ${n} bytes; the parity body has ${bodyBytes}`);
    if (n > longest) longest = n;
    if (i === missing) continue;
    const p = stripe[i];
    if (p === undefined) throw new ParityError(`packet ${i} of the stripe is missing too`);
    if (p.byteLength !== n)
      throw new ParityError(`packet ${i} has ${p.byteLength} bytes; the parity says ${n}`);
  }
  if (longest !== bodyBytes)
    throw new ParityError(`the parity body has ${bodyBytes} bytes; the longest packet ${longest}`);
  const n = lengthOf(missing);
  const out = parity.slice(header, header + n);
  for (let i = 0; i < stripe.length; i++) {
    if (i === missing) continue;
    const p = stripe[i] as Uint8Array;
    const m = Math.min(n, p.byteLength);
    for (let j = 0; j < m; j++) out[j] = (out[j] ?? 0) ^ (p[j] ?? 0);
  }
  return out;
}

/**
 * When the true source sends real parity: on when the audience's measured loss (packets members
 * found missing on their trees) reaches `onLoss`, off again once it has stayed at or below `offLoss`
 * for `offHoldMs`. Hysteresis, so a loss rate near the threshold does not flap the 1/M cost.
 */
export class ParitySwitch {
  active = false;
  private quietSince = Number.NaN;

  constructor(
    private readonly onLoss: number,
    private readonly offLoss: number,
    private readonly offHoldMs: number,
  ) {}

  /** Feed one measurement; returns true if the state changed. */
  measure(now: number, lossFraction: number): boolean {
    if (!Number.isFinite(lossFraction) || lossFraction < 0) return false;
    if (!this.active) {
      if (lossFraction >= this.onLoss) {
        this.active = true;
        this.quietSince = Number.NaN;
        return true;
      }
      return false;
    }
    if (lossFraction > this.offLoss) {
      this.quietSince = Number.NaN;
      return false;
    }
    if (Number.isNaN(this.quietSince)) this.quietSince = now;
    if (now - this.quietSince >= this.offHoldMs) {
      this.active = false;
      this.quietSince = Number.NaN;
      return true;
    }
    return false;
  }
}
