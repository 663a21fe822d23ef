// Purges a sync has read from the log but not yet applied to L1: a bulk
// re-price's page holds tens of thousands of ids, and applying them (each
// key dropped from L1, each id remembered) took the isolate's one thread for
// a hundred milliseconds and more a page, every visitor of a cached page
// waiting behind it. Here a page is indexed by id at once (a map insert an
// id), so that every entry is judged against it from the moment it is read,
// and applied one record at a time in the background, the isolate's requests
// served between two records (docs/architecture.md#invalidation, "Bulk purges").
//
// Bounded: at most two pages wait (the one being applied and the next read);
// a sync that read a third waits for the first to be applied (whenRoom).
// The application is a lease like the sync (shared/leases.ts): it runs under
// the `waitUntil` of the request that started it, and if that request
// vanishes, the next request that asks starts it again once the lease lapses.
import type { Clock } from "../shared/clock";
import type { Entry } from "../cache/entry";
import type { PurgedAt } from "../cache/readThrough";
import type { ResourceName } from "../origin/resources";
import type { Verdict } from "./knownPurges";
import type { PurgeRecord } from "./record";

/** The pages a sync may have read ahead of their application: the one being applied, and the next. */
const PAGES_PENDING_MAX = 2;

export interface PendingPurges {
  /** Indexes a page's records (id purges only) and queues them; `keepIds(index)`: whether that record's ids are to be remembered. */
  add(records: readonly PurgeRecord[], keepIds: (index: number) => boolean): void;
  /** What the purges waiting here make of an entry (the watcher asks after what it knows). */
  judge(entry: Entry, id: string, resource: ResourceName): Verdict;
  /** When the resource was purged by the purges waiting here (0: not). */
  purgedAt(id: string, resource: ResourceName): PurgedAt;
  /** Applies everything that waits, at once (a visitor waits for it: see watcher.ts); an application under way stops at its next step. */
  applyNow(): void;
  /** Starts applying what waits, one record at a time, under `background`, unless that is under way. */
  apply(background: (work: Promise<unknown>) => void): void;
  /** Resolves once there is room for another page (fewer than PAGES_PENDING_MAX wait), applying meanwhile. */
  whenRoom(background: (work: Promise<unknown>) => void): Promise<void>;
  /** Forgets everything waiting (the isolate starts over: what L1 holds is kept only for errors). */
  clear(): void;
  /** Records waiting. */
  size(): number;
}

export function createPendingPurges(deps: {
  clock: Clock;
  /** Applies one record to L1 and to what the isolate remembers (watcher.ts). */
  applyOne: (record: PurgeRecord, keepIds: boolean) => void;
  /** How long one step of the application may take before another request takes it over. */
  leaseMs: number;
  /** Lets the isolate's other requests run (the next turn of the event loop). */
  yieldNow?: () => Promise<void>;
}): PendingPurges {
  const yieldNow = deps.yieldNow ?? (() => new Promise<void>((resolve) => setTimeout(resolve, 0)));
  const byId = new Map<string, PurgeRecord[]>();
  /** Pages waiting, oldest first, each its records still to apply (with whether to remember their ids). */
  const pages: { record: PurgeRecord; keepIds: boolean }[][] = [];
  /** Until when the application under way holds its lease (0: none), and which one it is (one that lapsed stops at its next step). */
  let applyingUntil = 0;
  let applier = 0;
  /** Woken whenever a page has been applied. */
  const waiting = new Set<() => void>();

  function unindex(record: PurgeRecord): void {
    for (const id of record.ids) {
      const records = byId.get(id);
      if (!records) continue;
      const at = records.indexOf(record);
      if (at >= 0) records.splice(at, 1);
      if (records.length === 0) byId.delete(id);
    }
  }

  async function applyAll(mine: number): Promise<void> {
    while (pages.length > 0 && applier === mine) {
      const page = pages[0]!;
      const next = page.shift();
      if (next) {
        deps.applyOne(next.record, next.keepIds);
        unindex(next.record);
      }
      if (page.length === 0) {
        pages.shift();
        for (const wake of waiting) wake();
      }
      if (pages.length > 0) {
        await yieldNow();
        if (applier === mine) applyingUntil = deps.clock.now() + deps.leaseMs;
      }
    }
  }

  function apply(background: (work: Promise<unknown>) => void): void {
    if (pages.length === 0 || applyingUntil > deps.clock.now()) return;
    applyingUntil = deps.clock.now() + deps.leaseMs;
    const mine = ++applier;
    const work = applyAll(mine).finally(() => {
      if (applier === mine) applyingUntil = 0;
    });
    background(work.catch(() => undefined));
  }

  return {
    add(records, keepIds) {
      const page = records.map((record, index) => ({ record, keepIds: keepIds(index) }));
      if (page.length === 0) return;
      for (const { record } of page)
        for (const id of record.ids) {
          const list = byId.get(id);
          if (list) list.push(record);
          else byId.set(id, [record]);
        }
      pages.push(page);
    },

    judge(entry, id, resource) {
      const records = byId.get(id);
      if (!records) return "ok";
      let verdict: Verdict = "ok";
      for (const record of records) {
        if (record.at <= entry.fetchedAt || !record.resources.includes(resource)) continue;
        if (record.mode === "hard") return "gone";
        verdict = "stale";
      }
      return verdict;
    },

    purgedAt(id, resource) {
      const at: PurgedAt = { hard: 0, any: 0 };
      for (const record of byId.get(id) ?? []) {
        if (!record.resources.includes(resource)) continue;
        at.any = Math.max(at.any, record.at);
        if (record.mode === "hard") at.hard = Math.max(at.hard, record.at);
      }
      return at;
    },

    apply,

    applyNow() {
      applier++;
      applyingUntil = 0;
      for (const page of pages.splice(0))
        for (const { record, keepIds } of page) {
          deps.applyOne(record, keepIds);
          unindex(record);
        }
      for (const wake of waiting) wake();
    },

    async whenRoom(background) {
      while (pages.length >= PAGES_PENDING_MAX) {
        apply(background);
        await new Promise<void>((resolve) => {
          // Looked at again within a lease at most: an application whose request vanished lapses, and this one takes it over.
          const timer = setTimeout(() => wake(), deps.leaseMs);
          const wake = () => {
            clearTimeout(timer);
            waiting.delete(wake);
            resolve();
          };
          waiting.add(wake);
        });
      }
    },

    clear() {
      byId.clear();
      pages.length = 0;
      for (const wake of waiting) wake();
    },

    size: () => pages.reduce((sum, page) => sum + page.length, 0),
  };
}
