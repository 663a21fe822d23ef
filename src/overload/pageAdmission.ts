// Where a page's new work meets admission (docs/architecture.md#overload):
// the read path (cache/readThrough.ts) serves what L1 holds and hands the
// rest here, as what it knows of it and the steps to read or shed it;
// admission (./admission.ts) decides when the rest runs, or sheds it.
// Joining work already under way in the isolate is no new work: a herd for
// one cold product waits for its one fill, and is not shed. Later pages for
// a product whose page waits for its turn go on and join whatever that page
// starts, rather than queue as new work of their own (a herd for one
// product while the isolate runs late would otherwise fill the queue of
// cold pages, and be shed past it).
import type { Clock } from "../shared/clock";
import { createLeaseTable } from "../shared/leases";
import type { Admission } from "./admission";

/** What a page lacks once L1 has served it, as the read path knows it, and the steps to read or shed it. Plain data and this page's own functions. */
interface PageWork {
  /** Its subject's key, when L1 lacks the subject: the subject's fill leads the page's, the other parts follow it. */
  subjectKey?: string;
  /** Whether what it lacks is under way in this isolate already (its subject, or else every part): joining is no new work. */
  joins: boolean;
  /** Whether it has a copy it would show of every part it lacks: then it does not wait for its turn. */
  withCopies: boolean;
  /** Reads what it lacks past L1; `afterWait`: L1 first, which a request that went ahead meanwhile may have filled. */
  read(afterWait: boolean): Promise<void>;
  /** Serves what it still lacks as shed: "stale" (its copies), "refused" (none), or undefined when nothing is left to shed. */
  shed(): "stale" | "refused" | undefined;
  /** Its request's signal: a visitor who left gives up its place, or its slot, at once. */
  visitor?: AbortSignal;
  /** Who asks (./client.ts), for the order of the waiting pages. */
  client?: string;
}

export interface PageAdmission {
  /** Reads `work` as admission lets it, or sheds it; true when it was shed as its client's excess (a 429, not a 503). */
  admitPage(work: PageWork): Promise<boolean>;
}

/** `turnLeaseMs`: how long a page waiting for its turn holds its product's place at most (its longest hold and wait, and some). */
export function createPageAdmission({
  admission,
  clock,
  turnLeaseMs,
}: {
  admission: Pick<Admission, "admit" | "noteShed">;
  clock: Clock;
  turnLeaseMs: number;
}): PageAdmission {
  /** Products whose page waits for its turn, by a number per page: a lease, so that a cancelled page's place lapses with its longest wait. */
  const awaitingTurn = createLeaseTable<string, number>({ clock });
  let nextPage = 0;
  return {
    async admitPage(work) {
      const newWork = !work.joins && (work.subjectKey === undefined || awaitingTurn.holder(work.subjectKey) === undefined);
      if (!newWork) {
        await work.read(false);
        return false;
      }
      const page = ++nextPage;
      const { subjectKey } = work;
      if (subjectKey) awaitingTurn.take(subjectKey, clock.now() + turnLeaseMs, page);
      let admitted: Awaited<ReturnType<typeof admission.admit<void>>>;
      try {
        admitted = await admission.admit(() => work.read(true), !work.withCopies, work.visitor, work.client);
      } finally {
        if (subjectKey) awaitingTurn.release(subjectKey, page);
      }
      // Shed, unless its visitor left (nobody reads the answer): followers of the same product that went on meanwhile may have filled what it lacks.
      if (typeof admitted !== "string" || admitted === "left" || work.visitor?.aborted) return false;
      const shed = work.shed();
      if (shed) admission.noteShed(shed);
      return shed !== undefined && admitted === "over share";
    },
  };
}
