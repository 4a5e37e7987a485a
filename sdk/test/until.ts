/**
 * Resolves once `check()` holds, polling every 25 ms; rejects after `timeoutMs` naming `what`. For
 * the loopback WebRTC tests, whose progress depends on real sockets and cannot be driven by hand.
 */
export function until(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const timer = setInterval(() => {
      if (check()) {
        clearInterval(timer);
        resolve();
      } else if (Date.now() - started > timeoutMs) {
        clearInterval(timer);
        reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`));
      }
    }, 25);
  });
}
