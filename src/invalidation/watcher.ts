// How each isolate learns of purges (docs/architecture.md#invalidation): it reads
// the purge log at most every `pollMs`, drops or marks its L1 entries for id
// purges, and keeps tag and all purges to judge every entry it is about to
// serve, from L1 or L2, by the time the entry was fetched.
//
// The bound: knowledge older than `pollMs` is refreshed before the request
// is served (one L2 round trip, within its budget); older than half of it,
// in the background. So after a purge's 202, no isolate serves the old data
// more than `pollMs` (plus the L2 round trip) later.
//
// Blind (L2 unreachable for longer than `blindAfterMs`): purges may be
// missed, so entries older than `blindMaxAgeMs` are treated as stale and
// refreshed from the origin, once each, in the background.
import type { Clock } from "../shared/clock";
import type { Entry } from "../cache/entry";
import { entryKey } from "../cache/keys";
import type { L1Purging, PurgedAt } from "../cache/readThrough";
import type { ResourceName } from "../origin/resources";
import { WIDE_MAX, type PurgeLog, type WideMark } from "./log";
import { isWide, type PurgeRecord } from "./record";
import { pollUntil, within } from "../shared/leases";

type Verdict = "ok" | "stale" | "gone";

export interface PurgeWatcherOptions {
  log: PurgeLog | null;
  l1: L1Purging;
  clock: Clock;
  keyPrefix: string;
  pollMs: number;
  /** How long a tag/all purge matters: the longest an entry can live. */
  wideRetentionMs: number;
  blindAfterMs: number;
  blindMaxAgeMs: number;
  /** Longest a request waits for a sync another request started (its L2 read's budget, and some). */
  syncWaitMs: number;
}

export interface PurgeWatcher {
  /** Brings this isolate's knowledge of purges up to date when it is getting old (see the bound above). */
  sync(background: (work: Promise<unknown>) => void): Promise<void>;
  /** What the purges known here make of an entry: still good, stale (soft purge), or gone (hard purge). */
  judge(entry: Entry, id: string, resource: ResourceName, tags: readonly string[]): Verdict;
  /**
   * When the resource was last purged as far as this isolate knows (0: never):
   * `hard`, by a hard purge (older copies are gone), and `any`, by any purge
   * (older copies are at best stale: a refresh must not take one back as fresh).
   */
  purgedAt(id: string, resource: ResourceName, tags: readonly string[]): PurgedAt;
  /** Applies a purge this isolate just recorded, without waiting for the next poll. */
  apply(record: PurgeRecord): void;
  status(): { seq: number; lastSyncAt: number; blind: boolean; widePurges: number };
}

interface IdPurge {
  at: number;
  mode: PurgeRecord["mode"];
  resources: readonly ResourceName[];
}

/** Recent id purges remembered for judging (races with fills in flight); older ones were applied to L1 and Redis. */
const RECENT_ID_PURGES = 10_000;

const NO_MARKS = { hard: 0, soft: 0 } as const;

/** A marks map key: the resource, and the tag (none for an `all` purge). */
function markKey(resource: ResourceName, tag: string | null): string {
  return tag === null ? resource : `${resource}|${tag}`;
}

export function createPurgeWatcher(options: PurgeWatcherOptions): PurgeWatcher {
  const { log, l1, clock, keyPrefix } = options;
  let seq = 0;
  // Never synced: the first request syncs before it is served.
  let lastSyncAt = -Infinity;
  /**
   * The sync under way, as a lease (src/shared/leases.ts): it runs under the
   * `waitUntil` of the request that started it, and if that request vanishes
   * anyway the next request starts another once `syncWaitMs` has passed.
   */
  let syncing: { work: Promise<void>; until: number } | null = null;
  /**
   * The latest hard and soft tag/all purge of each resource and tag
   * (markKey), as the marks hash in Redis keeps them (invalidation/log.ts):
   * judging an entry costs one lookup per tag, whatever the number of purges.
   */
  let marks = new Map<string, { hard: number; soft: number }>();
  /** Everything fetched before this was purged (hard): where dropped marks fold into. */
  let floor = 0;
  const recentIds = new Map<string, IdPurge>();

  function raiseMark(mark: WideMark): void {
    const key = markKey(mark.resource, mark.tag);
    const known = marks.get(key);
    marks.delete(key); // re-insert: the Map's order is the eviction order
    marks.set(key, { hard: Math.max(known?.hard ?? 0, mark.hard), soft: Math.max(known?.soft ?? 0, mark.soft) });
    if (marks.size <= WIDE_MAX) return;
    const horizon = clock.now() - options.wideRetentionMs;
    for (const [key, { hard, soft }] of marks) if (Math.max(hard, soft) < horizon) marks.delete(key);
    while (marks.size > WIDE_MAX) {
      const [key, oldest] = marks.entries().next().value!;
      floor = Math.max(floor, oldest.hard, oldest.soft);
      marks.delete(key);
    }
  }

  function rememberWide(record: PurgeRecord): void {
    const times = record.mode === "hard" ? { hard: record.at, soft: 0 } : { hard: 0, soft: record.at };
    for (const resource of record.resources) {
      if (record.all) raiseMark({ resource, tag: null, ...times });
      for (const tag of record.tags) raiseMark({ resource, tag, ...times });
    }
  }

  /** The latest marks that apply to an entry of `resource` carrying `tags` (on every read: nothing to do when there are none). */
  function marksFor(resource: ResourceName, tags: readonly string[]): { readonly hard: number; readonly soft: number } {
    if (marks.size === 0) return NO_MARKS;
    let [hard, soft] = [0, 0];
    for (let i = -1; i < tags.length; i++) {
      const mark = marks.get(markKey(resource, i < 0 ? null : tags[i]!));
      if (!mark) continue;
      hard = Math.max(hard, mark.hard);
      soft = Math.max(soft, mark.soft);
    }
    return { hard, soft };
  }

  function rememberIds(record: PurgeRecord): void {
    for (const id of record.ids) {
      recentIds.delete(id); // re-insert: the Map's order is the eviction order
      recentIds.set(id, { at: record.at, mode: record.mode, resources: record.resources });
    }
    while (recentIds.size > RECENT_ID_PURGES) recentIds.delete(recentIds.keys().next().value!);
  }

  function applyToL1(record: PurgeRecord): void {
    for (const id of record.ids) {
      for (const resource of record.resources) {
        const key = entryKey(keyPrefix, resource, id);
        if (record.mode === "hard") l1.forget(key);
        else l1.markStale(key, record.at);
      }
    }
  }

  function apply(record: PurgeRecord): void {
    if (isWide(record)) rememberWide(record);
    rememberIds(record);
    applyToL1(record);
    // The next purge in sequence (one this isolate recorded itself, or the
    // next of a sync): nothing before it is missing, so the sync need not read it again.
    if (record.seq === seq + 1) seq = record.seq;
  }

  async function syncNow(): Promise<void> {
    if (!log) return;
    const answer = await log.readSince(seq);
    if (!answer) return; // L2 unavailable: stay as we are; `blind` tells how long
    if (!answer.caughtUp) {
      // New isolate, too far behind, or the log was reset: start over from
      // the tag/all marks (id purges are applied in Redis, where reads go next).
      l1.forgetAll();
      marks = new Map();
      recentIds.clear();
      floor = Math.max(floor, answer.floor);
      for (const mark of answer.marks) raiseMark(mark);
    } else {
      for (const record of answer.records) apply(record);
    }
    seq = answer.seq;
    lastSyncAt = clock.now();
  }

  /** Starts a sync in this request, unless one is under way: then `undefined` (this request does not await another's). */
  function startSync(background: (work: Promise<unknown>) => void): Promise<void> | undefined {
    if (syncing && syncing.until > clock.now()) return undefined;
    const work = syncNow().finally(() => {
      if (syncing?.work === work) syncing = null;
    });
    syncing = { work, until: clock.now() + options.syncWaitMs };
    background(work.catch(() => undefined));
    return work;
  }

  const syncUnderWay = () => syncing !== null && syncing.until > clock.now();

  const blind = () => log !== null && clock.now() - lastSyncAt > options.blindAfterMs;

  return {
    async sync(background) {
      if (!log) return;
      const age = clock.now() - lastSyncAt;
      if (age >= options.pollMs) {
        const mine = startSync(background);
        const until = clock.now() + options.syncWaitMs;
        // Another request's sync is watched for on this request's own timers (shared/leases.ts, pollUntil).
        if (mine) await within(mine.catch(() => undefined), options.syncWaitMs, () => undefined);
        else await pollUntil(() => (syncUnderWay() ? undefined : true), until, clock.now);
      } else if (age >= options.pollMs / 2 && !syncUnderWay()) {
        void startSync(background)?.catch(() => undefined);
      }
    },

    judge(entry, id, resource, tags) {
      if (entry.fetchedAt < floor) return "gone";
      let verdict: Verdict = "ok";
      const idPurge = recentIds.get(id);
      if (idPurge && entry.fetchedAt < idPurge.at && idPurge.resources.includes(resource)) {
        if (idPurge.mode === "hard") return "gone";
        verdict = "stale";
      }
      const wide = marksFor(resource, tags);
      if (wide.hard > entry.fetchedAt) return "gone";
      if (wide.soft > entry.fetchedAt) verdict = "stale";
      if (verdict === "ok" && blind() && clock.now() - entry.fetchedAt > options.blindMaxAgeMs) verdict = "stale";
      return verdict;
    },

    purgedAt(id, resource, tags) {
      const wide = marksFor(resource, tags);
      const at: PurgedAt = { hard: Math.max(floor, wide.hard), any: Math.max(floor, wide.hard, wide.soft) };
      const idPurge = recentIds.get(id);
      if (idPurge && idPurge.resources.includes(resource)) {
        at.any = Math.max(at.any, idPurge.at);
        if (idPurge.mode === "hard") at.hard = Math.max(at.hard, idPurge.at);
      }
      return at;
    },

    apply,

    status: () => ({ seq, lastSyncAt, blind: blind(), widePurges: marks.size }),
  };
}
