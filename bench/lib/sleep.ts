// A wait that a stopped run cuts short: it resolves (never rejects) after `ms`
// or when `signal` aborts, whichever comes first, and leaves no listener
// behind on the signal.
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}
