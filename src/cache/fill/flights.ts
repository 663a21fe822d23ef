// One fill per key per isolate, shared by the requests that want it while it runs. It belongs to the request that started it (and runs
// under its `waitUntil`); the others watch, on their own timers, for the plain result it leaves. It is a lease: past its bound the next
// reader starts a new one. Why not lru-cache's `fetchMethod`: rule 2 of docs/architecture.md#sharing-work-across-requests-in-one-isolate.
import type { Config } from "../../config";
import { isAnswerAboutId, OriginError } from "../../origin/failure";
import type { Clock } from "../../shared/clock";
import { createLeaseTable, ISOLATE_STALL_MS, pollUntil, within } from "../../shared/leases";
import { Departed, departed } from "../../overload";
import { entryState, type Entry } from "../entry";
import { fillBoundMs, type FillContext } from "./fill";
import type { L1 } from "../l1";
import type { Rejections } from "./rejections";

/** A fill in flight: the end of its lease, and, once it settled, its outcome (plain data, read by the requests that joined it). */
interface Flight {
  until: number;
  /** The fill's outcome, and where its entry came from (FillContext.via: what those who joined it were served from). */
  settled?: { entry: Entry; via: FillContext["via"] } | { error: unknown };
  /**
   * Until when a request that joined the fill is known to still have its visitor: each one renews it at every look while it waits (plain
   * data, see watch). A fill whose starter left goes on while a joiner's visitor is there, and stops soon after the last one leaves; a
   * joiner that looked too late finds the fill stopped and starts its own.
   */
  wantedUntil: number;
  /** Other requests of this isolate joined the fill: others elsewhere may well be waiting for it too (fill.ts, storeInL2). */
  joined?: boolean;
}

export interface Flights {
  /** A fill of `key` is under way in this isolate. */
  running(key: string): boolean;
  /** The fill's entry, started here or joined (`via`: where a joined one's came from); a joined fill past its bound is taken over once. */
  await(key: string, context: FillContext): Promise<{ entry: Entry; joined: boolean; via?: FillContext["via"] }>;
  /** Starts a fill that nobody waits for, unless one is under way. */
  start(key: string, context: FillContext): void;
  stats(): { inFlight: number; takenOver: number };
}

export interface FlightsDeps {
  config: Pick<Config, "lockTtlMs" | "policies">;
  clock: Clock;
  fill: (key: string, context: FillContext) => Promise<Entry>;
  l1: L1;
  rejections: Rejections;
  /** Told of each fill that landed, once its entry is in L1 and its lease released (the location tier's puts: readThrough.ts). */
  landed?: (key: string, context: FillContext) => void;
}

export function createFlights({ config, clock, fill, l1, rejections, landed }: FlightsDeps): Flights {
  /** Fills in flight in this isolate, by key: leases that end at the fill's bound. */
  const fills = createLeaseTable<string, Flight>({ clock });
  let takenOver = 0;

  /**
   * Joins the fill of `key` in flight in this isolate, or starts one in this request. The fill runs under this request's `waitUntil`, so
   * that the requests that joined it get their answer even if this visitor leaves.
   */
  function fillOrJoin(key: string, context: FillContext): { flight: Flight; work?: Promise<Entry> } {
    const running = fills.holder(key);
    if (running) return { flight: running };
    const rejection = rejections.of(key);
    if (rejection) {
      const error = new OriginError(context.resource, rejection.failure, "the origin's last answer about this id was of no use");
      return { flight: { until: clock.now(), settled: { error }, wantedUntil: 0 } };
    }
    // Those who join wait on their own timers until `until` at most: a request whose only pending work is another request's I/O is taken
    // for hung and cancelled in Workers, and this bound is what it costs if that request goes away.
    const flight: Flight = { until: clock.now() + fillBoundMs(config, context.resource), wantedUntil: 0 };
    // A visitor's fill goes on while its visitor, or one who joined it, is there (fill.ts checks before each step).
    const visitor = context.visitor;
    if (visitor) context.wanted = () => !visitor.aborted || flight.wantedUntil > clock.now();
    context.joinedHere = () => flight.joined === true;
    const work = fill(key, context).then(
      (entry) => {
        l1.keep(key, entry);
        flight.settled = { entry, via: context.via };
        fills.release(key, flight);
        landed?.(key, context);
        return entry;
      },
      (error: unknown) => {
        if (isAnswerAboutId(error)) rejections.remember(key, context.resource, error.failure);
        flight.settled = { error };
        fills.release(key, flight);
        throw error;
      },
    );
    fills.take(key, flight.until, flight);
    context.background(work.catch(() => undefined));
    return { flight, work };
  }

  /**
   * A joined request's look at the fill: its outcome, or "left" once its visitor is gone; meanwhile each look says somebody still waits.
   */
  function watch(flight: Flight, { visitor }: FillContext): Flight["settled"] | "left" {
    if (flight.settled || !visitor) return flight.settled;
    if (visitor.aborted) return "left";
    // Until past the next look: looks are a poll's pause apart (16 ms at most), plus however long this isolate stalls (shared/leases.ts).
    flight.wantedUntil = clock.now() + ISOLATE_STALL_MS;
    return undefined;
  }

  return {
    running: (key) => fills.holder(key) !== undefined,
    async await(key, context) {
      for (let attempt = 0; attempt < 2; attempt++) {
        const { flight, work } = fillOrJoin(key, context);
        if (work) {
          const entry = await within(work, flight.until - clock.now(), () => undefined);
          if (entry) return { entry, joined: false };
          break;
        }
        flight.joined = true;
        const outcome = await pollUntil(() => watch(flight, context), flight.until, clock.now);
        if (outcome === "left") throw departed("wait for a fill");
        if (outcome && "entry" in outcome) return { entry: outcome.entry, joined: true, via: outcome.via };
        // Stopped because nobody seemed to wait, while this visitor still does: a fill of its own.
        if (outcome && outcome.error instanceof Departed && context.visitor?.aborted === false) continue;
        if (outcome) throw outcome.error;
        // Another reader may have taken it over and finished meanwhile.
        const landed = l1.entry(key);
        if (landed && landed.fetchedAt >= context.freshAfter && entryState(landed, clock.now()) === "fresh") return { entry: landed, joined: true };
        takenOver++;
      }
      throw new OriginError(context.resource, "timeout", "the fill took longer than its bound");
    },
    start: (key, context) => void fillOrJoin(key, context),
    stats: () => ({ inFlight: fills.size(), takenOver }),
  };
}
