// What can go wrong with an origin call, and whose fault it is: the service's (its breaker counts it), this isolate's (it does not),
// or an answer about one id. Its own module so that the client (client.ts) and the exchange it makes (exchange.ts) both speak it.
import type { ResourceName } from "./resources";

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
  | "circuit-open"
  /** Cut short by the caller: nobody waited for the answer any more (its visitor left). */
  | "abandoned";

/** What the origin client reports of one call: an answer, or why there was none. */
export type OriginOutcome = "found" | "absent" | OriginFailure;

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

/** What a failed origin call failed of: its OriginError's failure, else (a network error, anything thrown) "unreachable". */
export function failureOf(error: unknown): OriginFailure {
  return error instanceof OriginError ? error.failure : "unreachable";
}

/**
 * The service answered about this one id, but with nothing the tier can use: a status the contract does not give
 * (400, 422, …) or a body that breaks it (an origin that canonicalises `P-1` to `p-1` names another id). That is
 * the service working, not failing, and anyone can cause it by asking for junk ids: its breaker does not count
 * it, and the read path remembers the answer for that id for a short while instead (cache/fill/rejections.ts).
 */
export function isAnswerAboutId(error: unknown): error is OriginError {
  return error instanceof OriginError && (error.failure === "rejected" || error.failure === "invalid");
}

/** Statuses that say the service itself is failing or overloaded, whatever was asked: what its breaker counts. */
export function isServiceFailureStatus(status: number): boolean {
  return status >= 500 || status === 429;
}
