// Waiting for a server to answer: the worker under `wrangler dev`, and the
// benchmarks' Nginx and Varnish.

export interface Health {
  ok: boolean;
  /** What /healthz said: `{"ok":true}` or a configuration error. */
  body: string;
}

/**
 * Polls `url` until it answers at all (any HTTP status), for at most
 * `timeoutMs`. Rejects early when `gaveUp` settles first (the process, named
 * `who`, died).
 */
export async function waitForHealthz(url: string, timeoutMs: number, gaveUp: Promise<string>, who = "wrangler"): Promise<Health> {
  let failure: string | undefined;
  void gaveUp.then((how) => (failure = `${who} exited before ${url} answered (${how})`));
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (failure) throw new Error(failure);
    const health = await probe(url);
    if (health) return health;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`${url} did not answer within ${Math.round(timeoutMs / 1000)} s`);
}

async function probe(url: string): Promise<Health | null> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(2_000) });
    return { ok: res.ok, body: (await res.text()).trim() };
  } catch {
    return null; // not listening yet
  }
}

/**
 * L2's state as one word ("closed" = healthy, "open", "half-open",
 * "partial" across shards, "off"), from the worker's authenticated status
 * (`/__status.json`, `l2.state`; /healthz tells the public nothing of it);
 * the error's text when it cannot be read.
 */
export async function l2StateOf(baseUrl: string, purgeToken: string, timeoutMs = 2_000): Promise<string> {
  try {
    const res = await fetch(`${baseUrl}/__status.json`, { headers: { authorization: `Bearer ${purgeToken}` }, signal: AbortSignal.timeout(timeoutMs) });
    if (!res.ok) return `status ${res.status}`;
    const status = (await res.json()) as { l2?: { state?: unknown } };
    return String(status.l2?.state ?? "unknown");
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}
