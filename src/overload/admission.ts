// Admission of new work. Each rule, its reason and what measured it:
// docs/architecture.md#overload; this is the short map. A page that L1 can
// serve is always served. A page that needs new work (an L1 miss: an L2
// read, a lock claim, an origin fetch) starts it while the isolate keeps up
// (./lag.ts: at most maxLagMs late) with fewer than maxColdPages in
// progress, or else:
// - whatever the lag, while fewer than minColdPages are in progress;
// - once it has waited patienceMs, while fewer than patientColdPages are;
// - while most recent pages are cold (./window.ts: a crawler, a flood of
//   first views), past mostlyCold.coldPages in progress only while the lag
//   is all but nothing, and never on patience;
// - near the end of its wait, as one of lastChance.perSecond a second.
// Otherwise it waits on its own timers (shared/limiter.ts: bounded, paced,
// ordered by client through ./fairShare.ts, a full queue's place taken from
// the client holding most) and past its wait is shed: its copy, or a 503
// with Retry-After. A client already holding its share of the queue while
// pages wait is answered 429 instead of queued (ONE_BROWSER below), and its
// shed pages are 429s. While most visitors leave, a page with no copy is
// held first (./patience.ts).
import { createLimiter, LimiterFull } from "../shared/limiter";
import { createTokenBucket } from "../shared/tokenBucket";
import type { Clock } from "../shared/clock";
import type { LagMeter } from "./lag";
import type { Patience } from "./patience";
import { createFairShare } from "./fairShare";
import { UNKNOWN_CLIENT } from "./client";
import { createWindowCounts } from "./window";

export interface AdmissionOptions {
  clock: Clock;
  lag: LagMeter;
  /** The hold of cold pages during a departing flood (./patience.ts), and its longest. */
  patience: Patience;
  maxHoldMs: number;
  /** New work starts only while the lag is at most this, in ms (DEFAULTS.shedLagMs). */
  maxLagMs: number;
  /** Pages needing new work in progress at once (COLD_PAGES_MAX). */
  maxColdPages: number;
  /**
   * Pages needing new work that may be in progress whatever the lag: cold
   * pages keep moving while pages in L1 alone keep the isolate late (a
   * closed-loop load), at a CPU share these few cannot make large.
   */
  minColdPages: number;
  /**
   * A page held back this long goes while fewer than `patientColdPages` are
   * in progress, whatever the lag: under a load that keeps the isolate late
   * for good (closed-loop clients of cached pages), cold pages are late,
   * never refused; a client that only asks for cold pages (a crawler) is
   * slowed by the wait.
   */
  patienceMs: number;
  patientColdPages: number;
  /**
   * While most of the isolate's recent pages start new work (a crawler, a
   * flood of first views: `share` of its recent pages, ./window.ts), at
   * most `coldPages` are in progress at once beyond which the lag must be
   * at most `lagMs`.
   */
  mostlyCold: { coldPages: number; lagMs: number; share: number };
  /**
   * A page that has waited `afterShare` of coldPageWaitMs goes whatever the
   * other bounds (not `maxColdPages`), `perSecond` of them at most (a token
   * bucket of `perSecond` tokens); 0: none.
   */
  lastChance: { afterShare: number; perSecond: number };
  /** Pages held back start one per `paceMs` at most (`paceBurst` after a pause), oldest first: see shared/limiter.ts. */
  paceMs: number;
  paceBurst: number;
  /** A cold page of a client holding its share of the queue while pages wait is answered 429 this long after it came, its work never started (DEFAULTS.overShareAnswerMs says why not at once). */
  overShareAnswerMs: number;
  /** Pages that may wait for their turn, and how long each may wait (COLD_PAGE_WAIT_MS). */
  maxColdPagesQueued: number;
  coldPageWaitMs: number;
  /** A cold page's slot ends here at the latest, whatever became of its request: the longest a page read may take. */
  coldPageLeaseMs: number;
}

/**
 * A client holding fewer cold pages than this is never past its share: one
 * browser asks one host for as many pages at once over HTTP/1.1 (its six
 * connections). With hundreds of visitors holding a cold page each (an
 * isolate restarted under a shop's traffic), an equal split of the queue is
 * about one page each, and a visitor with a second tab open was refused
 * while the queue stood nearly empty (bench:chaos seed 29120427).
 */
const ONE_BROWSER = 6;

/** Why a cold page was shed: the isolate ran late all the while it could wait, or no slot came free (or the queue was full). */
type ShedReason = "lagging" | "busy";
/**
 * What admit says of a shed page: its reason, or "over share" when its
 * client held more than its share of the queue (the page is a 429, the
 * client's own excess, not the isolate's busyness: a 503).
 */
type Shed = ShedReason | "over share";

export interface AdmissionStats {
  lagMs: number;
  /** Clients with cold pages in admission's hands now (held, waiting or in progress). */
  clients: number;
  coldPages: number;
  coldPagesQueued: number;
  /** Whether most recent pages start new work (the tighter bound holds), and the pages started while they did. */
  mostlyCold: boolean;
  startedMostlyCold: number;
  admitted: number;
  /** Of those, pages let go at their last chance (the budget past the other bounds). */
  lastChance: number;
  /** Pages shed: while lagging or busy (after waiting, or at once), or on arrival, their client holding its share of the queue already while pages waited. */
  shed: Record<ShedReason, number> & { overShare: number };
  /** Of those, waiting pages whose place in the full queue went to another client's page (a client holding fewer). */
  pushedOut: number;
  /** Of those, pages beyond their client's share of the queue (those shed on arrival included): answered 429, not 503. */
  overShare: number;
  /** What the shed pages got: every part from a copy usable on error, or a part missing (a 503, or a section's default). */
  shedServedStale: number;
  shedRefused: number;
}

export interface Admission {
  /**
   * Runs one page's new work once the isolate admits it, or says why it was
   * shed (and then never runs it). `wait`: whether the page may wait for its
   * turn (not when it has a copy to serve at once); `visitor`: its request's
   * signal (one who left gives up its place, or its slot, at once); `client`:
   * who asks (./client.ts), for the order of the waiting pages.
   */
  admit<T>(work: () => Promise<T>, wait: boolean, visitor?: AbortSignal, client?: string): Promise<T | Shed | "left">;
  /** A page was read with no new work (all of it from L1, or joining work under way). */
  noteNoWork(): void;
  /** What a shed page got. */
  noteShed(outcome: "stale" | "refused"): void;
  stats(): AdmissionStats;
}

export function createAdmission(options: AdmissionOptions): Admission {
  const { clock, lag, patience, maxLagMs, minColdPages, patienceMs, patientColdPages } = options;
  const keepingUp = () => lag.lagMs() <= maxLagMs;
  const fair = createFairShare(clock);
  /** The longest a cold page is in admission's hands: its hold, its wait and its work. */
  const pageLeaseMs = options.maxHoldMs + options.coldPageWaitMs + options.coldPageLeaseMs;
  const counts = {
    admitted: 0,
    lastChance: 0,
    startedMostlyCold: 0,
    shed: { lagging: 0, busy: 0, overShare: 0 },
    overShare: 0,
    shedServedStale: 0,
    shedRefused: 0,
  };
  const pages = createWindowCounts(clock, ["started", "noWork"] as const);
  const mostlyCold = () => pages.share("started") >= options.mostlyCold.share;
  const lastChanceAfterMs = options.lastChance.afterShare * options.coldPageWaitMs;
  const { perSecond } = options.lastChance;
  /** Last chances left now; none when there are none to give. */
  const lastChances = perSecond > 0 && options.coldPageWaitMs > 0 ? createTokenBucket({ everyMs: 1000 / perSecond, burst: perSecond, clock }) : null;
  /** Takes a last chance for a page that waited `waitedMs`, if it may have one. */
  const lastChance = (waitedMs: number) => {
    if (!lastChances || waitedMs < lastChanceAfterMs || lastChances.available() < 1) return false;
    // Spent on the yes: the slot is all but certain to follow (maxColdPages is far from full when the other bounds say no).
    lastChances.spend();
    counts.lastChance++;
    return true;
  };
  const admits = (waitedMs: number) => {
    const inFlight = slots.inFlight;
    if (inFlight < minColdPages) return true;
    if (inFlight >= options.mostlyCold.coldPages && mostlyCold()) {
      return lag.lagMs() <= options.mostlyCold.lagMs || lastChance(waitedMs);
    }
    return keepingUp() || (waitedMs >= patienceMs && inFlight < patientColdPages) || lastChance(waitedMs);
  };
  const slots = createLimiter({
    maxConcurrent: options.maxColdPages,
    maxQueued: options.maxColdPagesQueued,
    maxWaitMs: options.coldPageWaitMs,
    maxHoldMs: options.coldPageLeaseMs,
    paceMs: options.paceMs,
    paceBurst: options.paceBurst,
    admits,
    // A page whose visitor left is in progress for nobody: what is left of it is background work.
    freeWhenCallerLeaves: true,
    rank: (client) => fair.holding(client),
    clock,
  });

  /**
   * How many times its share of the waiting queue `client` holds: whether
   * its next page is queued, and its shed pages' status. None for "unknown"
   * (every request off the platform: all visitors, never one client asking
   * too much) nor for a client alone: with nobody to share with, what it
   * meets is the isolate's busyness (a 503 after its wait), not its excess
   * (a restarted isolate's only client, Redis down, was told 429:
   * bench:chaos seed 29119402).
   */
  const timesShare = (client: string) =>
    client === UNKNOWN_CLIENT || fair.clients() < 2 || fair.holding(client) < ONE_BROWSER ? 0 : fair.timesShare(client, options.maxColdPagesQueued);
  /** Whether `client` holds its share of the queue already while pages wait: its next cold page is refused, not queued. */
  const holdsItsShare = (client: string) => slots.queued > 0 && timesShare(client) >= 1;

  async function admitNow<T>(work: () => Promise<T>, wait: boolean, visitor: AbortSignal | undefined, client: string): Promise<T | Shed | "left"> {
    let started = false;
    try {
      return await slots.run(
        () => {
          started = true;
          counts.admitted++;
          pages.note("started");
          if (mostlyCold()) counts.startedMostlyCold++;
          return work();
        },
        { waitMs: wait ? options.coldPageWaitMs : 0, caller: visitor, key: client },
      );
    } catch (error) {
      // The work's own LimiterFull (none is expected: the origin client turns its own into answers) is not a shed.
      if (!(error instanceof LimiterFull) || started) throw error;
      // A visitor who left while waiting was not shed: nobody is answered (overload/departures.ts counts the page).
      if (visitor?.aborted) return "left";
      const reason = keepingUp() ? "busy" : "lagging";
      counts.shed[reason]++;
      if (timesShare(client) <= 1) return reason;
      counts.overShare++;
      return "over share";
    }
  }

  return {
    async admit(work, wait, visitor, client = UNKNOWN_CLIENT) {
      const answered = patience.follow(visitor);
      if (wait && holdsItsShare(client)) {
        try {
          // Nothing started, nothing holding a place: one timer, then the answer.
          await new Promise((resolve) => setTimeout(resolve, options.overShareAnswerMs));
          if (visitor?.aborted) return "left";
          counts.shed.overShare++;
          counts.overShare++;
          return "over share";
        } finally {
          answered();
        }
      }
      const release = fair.start(client, pageLeaseMs);
      try {
        // A page with a copy to show is never held: it shows it.
        const holdMs = wait ? patience.holdMs() : 0;
        if (holdMs > 0) {
          await new Promise((resolve) => setTimeout(resolve, holdMs));
          patience.noteHeld(!visitor?.aborted);
          if (visitor?.aborted) return "left";
        }
        return await admitNow(work, wait, visitor, client);
      } finally {
        answered();
        release();
      }
    },
    noteNoWork: () => pages.note("noWork"),
    noteShed(outcome) {
      if (outcome === "stale") counts.shedServedStale++;
      else counts.shedRefused++;
    },
    stats: () => ({
      lagMs: lag.lagMs(),
      clients: fair.clients(),
      coldPages: slots.inFlight,
      coldPagesQueued: slots.queued,
      pushedOut: slots.pushedOut,
      mostlyCold: mostlyCold(),
      ...counts,
      shed: { ...counts.shed },
    }),
  };
}
