// Lock claims of several requests in one call (issue: Redis commands per
// page). Claims are most of what the tier sends Redis: one script run per
// page whose parts go to L2 or the origin, most of them for stock, fresh
// for 10 s, which a page must claim alone when its product is at hand. An
// isolate busy enough to claim every few milliseconds gathers them: the
// first claim while claims are frequent (`claimGatherWhenWithinMs`) waits
// `claimGatherMs` for others, which join its call; at a lower rate a claim
// goes at once, as before, and costs no wait.
//
// The Workers rules (docs/architecture.md#sharing-work-across-requests-in-one-isolate):
// the request that opens a gathering makes the call, under its own
// `waitUntil` so that it is made even if its visitor leaves, and awaits it
// as its own work. The requests that join hand it plain data (their claims)
// and watch, on their own timers, for the plain answers it leaves; a
// gathering is a lease: a joiner whose answers have not come by the call's
// due time plus its whole budget takes its claims for unanswered, as it
// would a claim call of its own that timed out (cache/fill/fill.ts then
// looks before it fetches).
import { DEFAULTS } from "../../config/defaults";
import type { Clock } from "../../shared/clock";
import { pollUntil } from "../../shared/leases";
import type { FillClaim, FillClaimRequest, L2, ReadAlong, WritesToCarry } from "./l2";

export interface ClaimOutbox {
  /** `requests`' answers, in their order, from a call of this request or one it joined; undefined for each when L2 did not answer. */
  claim(requests: readonly FillClaimRequest[], background: (work: Promise<unknown>) => void): Promise<(FillClaim | undefined)[]>;
  stats(): ClaimOutboxStats;
}

/** Calls made, claims sent in them, and claims that joined another request's call (status page). */
export interface ClaimOutboxStats {
  calls: number;
  claims: number;
  joined: number;
  /** Joiners that saw no answer by the lease's end. */
  lapsed: number;
}

/** A call being gathered, then made: plain data only. */
interface Gathering {
  requests: FillClaimRequest[];
  /** When its request makes the call. */
  due: number;
  /** Set once the call has answered (undefined entries: L2 did not). */
  answers?: (FillClaim | undefined)[];
}

export interface ClaimOutboxDeps {
  clock: Clock;
  sleep: (ms: number) => Promise<void>;
  /** The waiting fill writes each call takes along (fillWrites.ts). */
  carry?: WritesToCarry;
  /** What each call reads along, asked when it goes out (null: nothing this time). */
  readAlong?: () => ReadAlong | null;
}

export function createClaimOutbox(l2: L2, deps: ClaimOutboxDeps): ClaimOutbox {
  const { clock } = deps;
  /** The gathering that still takes claims (until its due time). */
  let open: Gathering | undefined;
  let lastCallAt = Number.NEGATIVE_INFINITY;
  const stats: ClaimOutboxStats = { calls: 0, claims: 0, joined: 0, lapsed: 0 };

  function call(requests: readonly FillClaimRequest[], background: (work: Promise<unknown>) => void): Promise<(FillClaim | undefined)[]> {
    lastCallAt = clock.now();
    stats.calls++;
    stats.claims += requests.length;
    return l2.claimFills(requests, { background, carry: deps.carry, readAlong: deps.readAlong?.() ?? undefined });
  }

  async function join(gathering: Gathering, requests: readonly FillClaimRequest[]): Promise<(FillClaim | undefined)[]> {
    const from = gathering.requests.length;
    gathering.requests.push(...requests);
    stats.joined += requests.length;
    const until = gathering.due + DEFAULTS.l2ClaimTimeoutMs + DEFAULTS.l2GateGraceMs;
    // No answer can come before the call is made: the first look is then, not every few ms of the gathering.
    const callIn = gathering.due - clock.now();
    if (callIn > 0) await deps.sleep(callIn);
    const answers = await pollUntil(() => gathering.answers, until, clock.now, DEFAULTS.claimPollMaxMs);
    if (!answers) {
      stats.lapsed++;
      return requests.map(() => undefined);
    }
    return answers.slice(from, from + requests.length);
  }

  return {
    claim(requests, background) {
      const now = clock.now();
      if (open && now < open.due && open.requests.length + requests.length <= DEFAULTS.claimsPerCall) return join(open, requests);
      if (now - lastCallAt >= DEFAULTS.claimGatherWhenWithinMs) return call(requests, background);
      const gathering: Gathering = { requests: [...requests], due: now + DEFAULTS.claimGatherMs };
      open = gathering;
      const work = deps.sleep(DEFAULTS.claimGatherMs).then(async () => {
        if (open === gathering) open = undefined;
        // Whatever the call's fate, its joiners get an answer (undefined: unanswered).
        const answers = await call(gathering.requests, background).catch(() => gathering.requests.map(() => undefined));
        gathering.answers = answers;
        return answers.slice(0, requests.length);
      });
      background(work);
      return work;
    },
    stats: () => ({ ...stats }),
  };
}
