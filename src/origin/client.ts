// The origin client: one GET per resource (exchange.ts), each bounded by its service's timeout, at most one retry (a connection error,
// with jitter, or a time-out this isolate noticed late: its own delay, not the service's), and the answer checked against the contract.
import { LISTING, RESOURCES, type ResourceName, type ResourceTypes } from "./resources";
import { productIdPage } from "./schemaParts";
import type { ProductIdPage } from "./types";
import { validateResource } from "./validate";
import * as v from "valibot";
import type { Breaker } from "../shared/breaker";
import { LimiterFull, type Limiter, type Priority } from "../shared/limiter";
import { isIsolateError, isolateDelayAllowedMs, leaseFor } from "../shared/leases";
import { abandoned, get, readJson } from "./exchange";
import { failureOf, isAnswerAboutId, isServiceFailureStatus, OriginError, type OriginFailure, type OriginOutcome } from "./failure";

export type OriginAnswer<T> = { found: true; data: T } | { found: false };

export interface OriginClient {
  /**
   * `priority`: "refresh" when a copy is already served, so that the call gives way to visitors under load (see shared/limiter.ts).
   * `stop`: aborts when nobody waits for the answer any more; the call then fails as "abandoned", which no breaker counts.
   */
  fetchResource<R extends ResourceName>(resource: R, id: string, priority?: Priority, stop?: AbortSignal): Promise<OriginAnswer<ResourceTypes[R]>>;
  listProductIds(cursor: string | null, limit: number): Promise<ProductIdPage>;
  /**
   * How many refreshes would be let through now (Infinity without a limiter). One that would
   * not is better not started: it would cost a lock claim, then a release, and fetch nothing.
   */
  refreshRoom(): number;
}

/**
 * The largest origin body read, and so the largest entry L2 holds (cache/l2/codec.ts, where the contract's largest answer is weighed:
 * about 470 KB of JSON): a service that sends more (a bug, a proxy's error page, a hostile answer) must not fill a 128 MB isolate.
 */
export const ORIGIN_MAX_BODY_BYTES = 1024 * 1024;

export interface OriginClientOptions {
  baseUrl: string;
  /** Bodies past this many bytes are not read: "invalid" (default ORIGIN_MAX_BODY_BYTES). */
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
  onFetch?: (service: ResourceName, outcome: OriginOutcome, detail?: string, priority?: Priority) => void;
  /** Told how long each answer took to be read, per service (the isolate's lag meter, shared/lag.ts). */
  onReply?: (service: ResourceName, ms: number) => void;
}

/**
 * The longest one `fetchResource` call should take: a first attempt whose time-out was noticed late, then
 * one more (see fetchResource). A caller that bounds its wait on the call (a fill's lease) uses this.
 */
export function originCallBoundMs(timeoutMs: number): number {
  return 2 * leaseFor(timeoutMs);
}

export function createOriginClient(options: OriginClientOptions): OriginClient {
  const doFetch: typeof fetch = options.fetch ?? ((input, init) => fetch(input, init));
  const maxBodyBytes = options.maxBodyBytes ?? ORIGIN_MAX_BODY_BYTES;
  const breakers = new Map<ResourceName, Breaker>();

  /** Runs one service call inside the isolate's slot limit, then the service's breaker. */
  async function guarded<T>(resource: ResourceName, deadline: number, priority: Priority, call: () => Promise<T>): Promise<T> {
    let breaker = breakers.get(resource);
    if (!breaker && options.breakerFor) breakers.set(resource, (breaker = options.breakerFor(resource)));
    const attempt = async () => {
      if (breaker && !breaker.allow()) throw new OriginError(resource, "circuit-open", "service failing, not called for now");
      const successesAtStart = breaker?.successes;
      // What the wait for a slot left of the service's timeout.
      const budgetMs = deadline - Date.now();
      try {
        const result = await call();
        breaker?.success();
        return result;
      } catch (error) {
        // Not the service's failure: this isolate's (see shared/breaker.ts), a time-out after a wait for a slot that took
        // more of the service's timeout than the isolate's own delays may (shared/leases.ts) included: the service never
        // had its time. A hung service is still caught: the calls that took the slots first had their full timeout.
        const timeoutMs = options.policies[resource].originTimeoutMs;
        const queuedOut = error instanceof OriginError && error.failure === "timeout" && budgetMs < timeoutMs - isolateDelayAllowedMs(timeoutMs);
        const ours =
          queuedOut ||
          isIsolateError(error) ||
          (error instanceof OriginError && (error.failure === "overloaded" || error.failure === "abandoned" || error.noticedLate));
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
      return await (options.limiter ? options.limiter.run(attempt, { waitMs: remaining, holdMs: leaseFor(remaining), priority }) : attempt());
    } catch (error) {
      // A full queue is this isolate's load, not the service's fault: the breaker never sees it.
      if (error instanceof LimiterFull) throw new OriginError(resource, "overloaded", error.message);
      throw error;
    }
  }

  /** A 200's body as JSON; any other status (its body cancelled) fails as `failure` says. */
  async function jsonOf(resource: ResourceName, response: Response, failure: (status: number) => OriginFailure): Promise<unknown> {
    if (response.status === 200) return readJson(resource, response, maxBodyBytes);
    await response.body?.cancel();
    throw new OriginError(resource, failure(response.status), `HTTP ${response.status}`);
  }

  async function fetchOnce<R extends ResourceName>(resource: R, id: string, deadline: number, stop?: AbortSignal): Promise<OriginAnswer<ResourceTypes[R]>> {
    const { onReply } = options;
    try {
      // Ids are validated before they get here; encoding is belt and braces.
      const url = options.baseUrl + RESOURCES[resource].path(encodeURIComponent(id));
      const response = await get(doFetch, resource, url, Math.max(1, deadline - Date.now()), stop, onReply && ((ms) => onReply(resource, ms)));
      if (response.status === 404) {
        await response.body?.cancel();
        return { found: false };
      }
      const body = await jsonOf(resource, response, (status) => (isServiceFailureStatus(status) ? "status" : "rejected"));
      const data = validateResource(resource, id, body);
      if (!data) throw new OriginError(resource, "invalid", "body does not follow the origin contract");
      return { found: true, data };
    } catch (error) {
      // Cut short while the body was read, say: still the caller's doing, not the service's failure.
      if (stop?.aborted && !(error instanceof OriginError && error.failure === "abandoned")) throw abandoned(resource);
      throw error;
    }
  }

  return {
    fetchResource(resource, id, priority = "visitor", stop) {
      const attempt = () => {
        const deadline = Date.now() + options.policies[resource].originTimeoutMs;
        return guarded(resource, deadline, priority, () => fetchOnce(resource, id, deadline, stop));
      };
      // A time-out noticed well past its deadline: this isolate was too busy to read an answer
      // that may have come in time (shared/leases.ts), so one more attempt rather than a 503 for
      // its own load. A hanging service is noticed on time: never called twice for one fill.
      const answer = attempt().catch((error: unknown) => {
        if (error instanceof OriginError && error.failure === "timeout" && error.noticedLate) return attempt();
        throw error;
      });
      const onFetch = options.onFetch;
      if (!onFetch) return answer;
      return answer.then(
        (result) => (onFetch(resource, result.found ? "found" : "absent"), result),
        (error) => {
          onFetch(resource, failureOf(error), error instanceof Error ? error.message : String(error), priority);
          throw error;
        },
      );
    },

    refreshRoom: () => options.limiter?.refreshRoom() ?? Number.POSITIVE_INFINITY,

    async listProductIds(cursor, limit) {
      const query = new URLSearchParams({ limit: String(limit) });
      if (cursor) query.set("cursor", cursor);
      const response = await get(doFetch, LISTING, `${options.baseUrl}/products?${query}`, 10_000);
      const parsed = v.safeParse(productIdPage, await jsonOf(LISTING, response, () => "status"));
      if (!parsed.success) throw new OriginError(LISTING, "invalid", "listing does not follow the origin contract");
      return parsed.output;
    },
  };
}
