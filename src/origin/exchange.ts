// One HTTP exchange with an origin service (a GET, its body read as JSON), apart from the client (client.ts), which decides what
// to ask, under which slot and breaker, and what the answer means: this part only knows HTTP and this isolate's connection gate.
import { OriginError } from "./failure";
import type { ResourceName } from "./resources";
import { isTimeout, noticedLate } from "../shared/leases";
import { gatePlaceMs, subrequest, SubrequestBudgetSpent } from "../shared/subrequests";
import { readBounded } from "../shared/body";

/** The retry's jittered pause: a few ms, so that it fits well within any service's timeout, spread so that retries do not land together. */
const RETRY_DELAY_MS = { min: 20, max: 60 };

/**
 * GET with a deadline; one retry when the connection itself failed (the
 * request never reached a handler). `stop` cuts it short: "abandoned".
 */
export async function get(
  doFetch: typeof fetch,
  resource: ResourceName,
  url: string,
  timeoutMs: number,
  stop?: AbortSignal,
  /** Told how long the answer's headers took to be read, from the fetch sent (the lag meter's measure, shared/lag.ts). */
  onReply?: (ms: number) => void,
): Promise<Response> {
  const deadline = Date.now() + timeoutMs;
  for (let attempt = 0; ; attempt++) {
    try {
      // The timeout starts once this request has a connection free (shared/subrequests.ts).
      return await subrequest(
        () => {
          const remaining = deadline - Date.now();
          if (remaining <= 0) throw new OriginError(resource, "overloaded", "no connection of this request free in time");
          const timeout = AbortSignal.timeout(remaining);
          const sentAt = Date.now();
          const answer = doFetch(url, { headers: { accept: "application/json" }, signal: stop ? AbortSignal.any([timeout, stop]) : timeout });
          return onReply ? answer.then((response) => (onReply(Date.now() - sentAt), response)) : answer;
        },
        // A place outlives the fetch's deadline: the abort may come late.
        gatePlaceMs(deadline - Date.now()),
        "origin",
      );
    } catch (error) {
      if (error instanceof OriginError) throw error;
      if (stop?.aborted) throw abandoned(resource);
      if (error instanceof SubrequestBudgetSpent) throw new OriginError(resource, "overloaded", error.message);
      if (isTimeout(error)) throw new OriginError(resource, "timeout", `no answer within ${timeoutMs} ms`, noticedLate(deadline - timeoutMs, timeoutMs));
      const delay = RETRY_DELAY_MS.min + Math.random() * (RETRY_DELAY_MS.max - RETRY_DELAY_MS.min);
      if (attempt >= 1 || Date.now() + delay >= deadline) throw new OriginError(resource, "unreachable", errorText(error));
      await new Promise((resolve) => setTimeout(resolve, delay));
      // A busy isolate may wake past the deadline: the call failed on its connection, not for want of one.
      if (Date.now() >= deadline) throw new OriginError(resource, "unreachable", errorText(error));
    }
  }
}

/** The body as JSON, read no further than `maxBodyBytes`: an origin's answer is untrusted input. */
export async function readJson(resource: ResourceName, response: Response, maxBodyBytes: number): Promise<unknown> {
  let bytes: Uint8Array | undefined;
  try {
    bytes = await readBounded(response, maxBodyBytes);
  } catch (error) {
    if (isTimeout(error)) throw new OriginError(resource, "timeout", "body too slow");
    throw new OriginError(resource, "unreachable", `body cut off: ${errorText(error)}`);
  }
  if (!bytes) throw new OriginError(resource, "invalid", `body over ${maxBodyBytes} bytes`);
  try {
    return JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    throw new OriginError(resource, "invalid", "body is not JSON");
  }
}

/** The caller cut the exchange short: nobody waits for its answer any more. */
export function abandoned(resource: ResourceName): OriginError {
  return new OriginError(resource, "abandoned", "nobody waits for the answer any more");
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
