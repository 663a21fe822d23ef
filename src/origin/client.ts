// The origin client: one GET per resource, each bounded by its service's
// timeout, at most one retry (a connection error, with jitter, or a time-out
// this isolate noticed late: its own delay, not the service's), and the
// answer checked against the contract.
import { LISTING, RESOURCES, type ResourceName, type ResourceTypes } from "./resources";
import { productIdPage } from "./schemaParts";
import type { ProductIdPage } from "./types";
import { validateResource } from "./validate";
import * as v from "valibot";
import type { Breaker } from "../shared/breaker";
import { LimiterFull, type Limiter, type Priority } from "./limiter";
import { isIsolateError, isTimeout, noticedLate } from "../shared/leases";
import { subrequest, SubrequestBudgetSpent } from "../shared/subrequests";

export type OriginAnswer<T> = { found: true; data: T } | { found: false };

export type OriginFailure =
  | "timeout"
  | "unreachable"
  /** A 5xx or 429: the service is failing or shedding load. */
  | "status"
  /** Another status about this id, such as 400 or 422 (see isAnswerAboutId). */
  | "rejected"
  /** A 200 whose body breaks the contract or names another id (see isAnswerAboutId). */
  | "invalid"
  /** Not attempted: this isolate's origin fetch slots and queue were full. */
  | "overloaded"
  /** Not attempted: the service failed repeatedly and its breaker is open. */
  | "circuit-open";

export class OriginError extends Error {
  constructor(
    readonly resource: ResourceName,
    readonly failure: OriginFailure,
    detail: string,
    /** A time-out this isolate noticed well past its deadline: its own delay, not the service's (shared/leases.ts). */
    readonly noticedLate = false,
  ) {
    super(`origin ${resource}: ${failure} (${detail})`);
    this.name = "OriginError";
  }
}

/**
 * The service answered about this one id, but with nothing the tier can use:
 * a status the contract does not give (400, 422, …) or a body that breaks it
 * (an origin that canonicalises `P-1` to `p-1` names another id). That is the
 * service working, not failing, and anyone can cause it by asking for junk
 * ids: its breaker does not count it, and the read path remembers the answer
 * for that id for a short while instead (cache/readThrough.ts).
 */
export function isAnswerAboutId(error: unknown): error is OriginError {
  return error instanceof OriginError && (error.failure === "rejected" || error.failure === "invalid");
}

/** Statuses that say the service itself is failing or overloaded, whatever was asked: what its breaker counts. */
function isServiceFailureStatus(status: number): boolean {
  return status >= 500 || status === 429;
}

export interface OriginClient {
  /** `priority`: "refresh" when a copy is already served, so that the call gives way to visitors under load (see limiter.ts). */
  fetchResource<R extends ResourceName>(resource: R, id: string, priority?: Priority): Promise<OriginAnswer<ResourceTypes[R]>>;
  listProductIds(cursor: string | null, limit: number): Promise<ProductIdPage>;
  /** Whether a refresh would be let through now; when not, it is better not started (it would only cost a lock claim). */
  acceptsRefresh(): boolean;
}

/**
 * The largest origin body read: the largest answer the contract allows is
 * about 470 KB of JSON (config/defaults.ts, l2EntryMaxJsonBytes), and a
 * service that sends more (a bug, a proxy's error page, a hostile answer)
 * must not fill a 128 MB isolate.
 */
const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;

export interface OriginClientOptions {
  baseUrl: string;
  /** Bodies past this many bytes are not read: "invalid" (default 1 MiB). */
  maxBodyBytes?: number;
  /** Each service's timeout (the policies of config/defaults.ts). */
  policies: Record<ResourceName, { originTimeoutMs: number }>;
  /** Caps concurrent fetches per isolate; none in unit tests. */
  limiter?: Limiter;
  /** One breaker per service, made on first use; none in unit tests. */
  breakerFor?: (service: ResourceName) => Breaker;
  /** Injected in tests; the global fetch otherwise. */
  fetch?: typeof fetch;
  /** Told of every service call's outcome, once (metrics, rate-limited logs); must not throw. */
  onFetch?: (service: ResourceName, outcome: "found" | "absent" | OriginFailure, detail?: string, priority?: Priority) => void;
}

const RETRY_DELAY_MS = { min: 20, max: 60 };
/**
 * A slot outlives its fetch's deadline by this much before it is reclaimed.
 * The fetch is aborted at its deadline, but an isolate busy rendering may
 * get to the abort late: a slot taken back from a holder that is only late
 * lets more fetches run than the cap allows, which makes it later still.
 */
const SLOT_GRACE_MS = 500;

/**
 * The longest one `fetchResource` call should take: a first attempt whose
 * time-out was noticed late, then one more (see fetchResource). A caller that
 * bounds its wait on the call (a fill's lease) uses this.
 */
export function originCallBoundMs(timeoutMs: number): number {
  return 2 * (timeoutMs + SLOT_GRACE_MS);
}

function pathFor(resource: ResourceName, id: string): string {
  // Ids are validated before they get here; encoding is belt and braces.
  return RESOURCES[resource].path(encodeURIComponent(id));
}

export function createOriginClient(options: OriginClientOptions): OriginClient {
  const doFetch = options.fetch ?? ((input, init) => fetch(input, init));

  /** GET with a deadline; one retry when the connection itself failed (the request never reached a handler). */
  async function get(resource: ResourceName, url: string, timeoutMs: number): Promise<Response> {
    const deadline = Date.now() + timeoutMs;
    for (let attempt = 0; ; attempt++) {
      try {
        // The timeout starts once this request has a connection free (shared/subrequests.ts).
        return await subrequest(() => {
          const remaining = deadline - Date.now();
          if (remaining <= 0) throw new OriginError(resource, "overloaded", "no connection of this request free in time");
          return doFetch(url, { headers: { accept: "application/json" }, signal: AbortSignal.timeout(remaining) });
        }, deadline - Date.now() + SLOT_GRACE_MS);
      } catch (error) {
        if (error instanceof OriginError) throw error;
        if (error instanceof SubrequestBudgetSpent) throw new OriginError(resource, "overloaded", error.message);
        if (isTimeout(error)) throw new OriginError(resource, "timeout", `no answer within ${timeoutMs} ms`, noticedLate(deadline - timeoutMs, timeoutMs));
        const delay = RETRY_DELAY_MS.min + Math.random() * (RETRY_DELAY_MS.max - RETRY_DELAY_MS.min);
        if (attempt >= 1 || Date.now() + delay >= deadline) {
          throw new OriginError(resource, "unreachable", errorText(error));
        }
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
    }
  }

  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;

  /** The body as JSON, read no further than `maxBodyBytes`: an origin's answer is untrusted input. */
  async function readJson(resource: ResourceName, response: Response): Promise<unknown> {
    const tooLarge = () => new OriginError(resource, "invalid", `body over ${maxBodyBytes} bytes`);
    if (Number(response.headers.get("content-length")) > maxBodyBytes) {
      await response.body?.cancel();
      throw tooLarge();
    }
    const chunks: Uint8Array[] = [];
    let size = 0;
    try {
      if (response.body) {
        const reader = response.body.getReader();
        for (let read = await reader.read(); !read.done; read = await reader.read()) {
          size += read.value.byteLength;
          if (size > maxBodyBytes) {
            await reader.cancel();
            throw tooLarge();
          }
          chunks.push(read.value);
        }
      }
    } catch (error) {
      if (error instanceof OriginError) throw error;
      if (isTimeout(error)) throw new OriginError(resource, "timeout", "body too slow");
      throw new OriginError(resource, "unreachable", `body cut off: ${errorText(error)}`);
    }
    const bytes = new Uint8Array(size);
    let at = 0;
    for (const chunk of chunks) {
      bytes.set(chunk, at);
      at += chunk.byteLength;
    }
    try {
      return JSON.parse(new TextDecoder().decode(bytes));
    } catch {
      throw new OriginError(resource, "invalid", "body is not JSON");
    }
  }

  const breakers = new Map<ResourceName, Breaker>();

  /** Runs one service call inside the isolate's slot limit, then the service's breaker. */
  async function guarded<T>(resource: ResourceName, deadline: number, priority: Priority, call: () => Promise<T>): Promise<T> {
    let breaker = breakers.get(resource);
    if (!breaker && options.breakerFor) breakers.set(resource, (breaker = options.breakerFor(resource)));
    const attempt = async () => {
      if (breaker && !breaker.allow()) throw new OriginError(resource, "circuit-open", "service failing, not called for now");
      const successesAtStart = breaker?.successes;
      try {
        const result = await call();
        breaker?.success();
        return result;
      } catch (error) {
        // Not the service's failure: this isolate's (see shared/breaker.ts).
        const ours = isIsolateError(error) || (error instanceof OriginError && (error.failure === "overloaded" || error.noticedLate));
        // An answer about one id: the service answered, as it does with a 404, so it is up.
        if (isAnswerAboutId(error)) breaker?.success();
        else if (!ours) breaker?.failure(successesAtStart, error instanceof OriginError && error.failure === "timeout");
        throw error;
      }
    };
    try {
      // The wait for a slot counts against the same deadline as the fetch,
      // and the slot is a lease that ends shortly after it (see limiter.ts).
      const remaining = deadline - Date.now();
      return await (options.limiter ? options.limiter.run(attempt, remaining, remaining + SLOT_GRACE_MS, priority) : attempt());
    } catch (error) {
      // A full queue is this isolate's load, not the service's fault: the breaker never sees it.
      if (error instanceof LimiterFull) throw new OriginError(resource, "overloaded", error.message);
      throw error;
    }
  }

  async function fetchOnce<R extends ResourceName>(resource: R, id: string, deadline: number): Promise<OriginAnswer<ResourceTypes[R]>> {
    const response = await get(resource, options.baseUrl + pathFor(resource, id), Math.max(1, deadline - Date.now()));
    if (response.status === 404) {
      await response.body?.cancel();
      return { found: false };
    }
    if (response.status !== 200) {
      await response.body?.cancel();
      throw new OriginError(resource, isServiceFailureStatus(response.status) ? "status" : "rejected", `HTTP ${response.status}`);
    }
    const data = validateResource(resource, id, await readJson(resource, response));
    if (!data) throw new OriginError(resource, "invalid", "body does not follow the origin contract");
    return { found: true, data };
  }

  return {
    fetchResource(resource, id, priority = "visitor") {
      const attempt = () => {
        const deadline = Date.now() + options.policies[resource].originTimeoutMs;
        return guarded(resource, deadline, priority, () => fetchOnce(resource, id, deadline));
      };
      // A time-out noticed well past its deadline means this isolate was too
      // busy to read an answer that may have come in time (shared/leases.ts):
      // one more attempt, with a fresh budget and slot, rather than a 503 for
      // the isolate's own load. A hanging service is noticed on time, so it is
      // never called twice for one fill.
      const answer = attempt().catch((error: unknown) => {
        if (error instanceof OriginError && error.failure === "timeout" && error.noticedLate) return attempt();
        throw error;
      });
      const onFetch = options.onFetch;
      if (!onFetch) return answer;
      return answer.then(
        (result) => (onFetch(resource, result.found ? "found" : "absent"), result),
        (error) => {
          onFetch(resource, error instanceof OriginError ? error.failure : "unreachable", error instanceof Error ? error.message : String(error), priority);
          throw error;
        },
      );
    },

    acceptsRefresh: () => options.limiter?.admitsRefresh() ?? true,

    async listProductIds(cursor, limit) {
      const query = new URLSearchParams({ limit: String(limit) });
      if (cursor) query.set("cursor", cursor);
      const response = await get(LISTING, `${options.baseUrl}/products?${query}`, 10_000);
      if (response.status !== 200) {
        await response.body?.cancel();
        throw new OriginError(LISTING, "status", `HTTP ${response.status}`);
      }
      const parsed = v.safeParse(productIdPage, await readJson(LISTING, response));
      if (!parsed.success) throw new OriginError(LISTING, "invalid", "listing does not follow the origin contract");
      return parsed.output;
    },
  };
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
