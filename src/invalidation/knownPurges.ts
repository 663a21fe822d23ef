// What this isolate knows of purges, and what that makes of an entry: the
// latest tag/all purges (marks), the floor where dropped marks fold into, and
// the recent id purges. Apart from the watcher (watcher.ts) because knowing
// and learning are separate concerns: this part is plain data judged on every
// read, the watcher decides when to read the log and what to do to L1.
import type { Clock } from "../shared/clock";
import type { Entry } from "../cache/entry";
import type { PurgedAt } from "../cache/readThrough";
import type { ResourceName } from "../origin/resources";
import { WIDE_MAX, type WideMark } from "./log";
import { isWide, type PurgeRecord } from "./record";

export type Verdict = "ok" | "stale" | "gone";

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

export interface KnownPurges {
  /** Remembers a purge: its tag/all marks, and its ids for judging. */
  remember(record: PurgeRecord): void;
  /** Forgets everything but the floor and starts over from the log's marks (a sync that could not catch up). */
  startOver(floor: number, marks: readonly WideMark[]): void;
  /** What the purges known here make of an entry, from their times alone (the watcher adds what being blind does). */
  judge(entry: Entry, id: string, resource: ResourceName, tags: readonly string[]): Verdict;
  /** See PurgeWatcher.purgedAt. */
  purgedAt(id: string, resource: ResourceName, tags: readonly string[]): PurgedAt;
  /** Tag/all marks held. */
  wideCount(): number;
}

export function createKnownPurges({ clock, wideRetentionMs }: { clock: Clock; wideRetentionMs: number }): KnownPurges {
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
    const horizon = clock.now() - wideRetentionMs;
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

  return {
    remember(record) {
      if (isWide(record)) rememberWide(record);
      rememberIds(record);
    },

    startOver(newFloor, newMarks) {
      marks = new Map();
      recentIds.clear();
      floor = Math.max(floor, newFloor);
      for (const mark of newMarks) raiseMark(mark);
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
      return verdict;
    },

    purgedAt(id, resource, tags) {
      const wide = marksFor(resource, tags);
      const at: PurgedAt = { hard: Math.max(floor, wide.hard), any: Math.max(floor, wide.hard, wide.soft) };
      const idPurge = recentIds.get(id);
      if (idPurge?.resources.includes(resource)) {
        at.any = Math.max(at.any, idPurge.at);
        if (idPurge.mode === "hard") at.hard = Math.max(at.hard, idPurge.at);
      }
      return at;
    },

    wideCount: () => marks.size,
  };
}
