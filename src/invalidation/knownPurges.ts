// What this isolate knows of purges, and what that makes of an entry: the latest tag/all purges (marks), the floor where dropped marks fold
// into, the recent id purges, and from which point of the log on it knows every id purge (KnownPurges.vouches). Plain data judged on every
// read; when to read the log and what to do to L1 is the watcher's (watcher.ts).
import type { Clock } from "../shared/clock";
import type { Entry } from "../cache/entry";
import type { PurgedAt } from "../cache/readThrough";
import type { PurgeStamp } from "../cache/location/purgeStamp";
import type { ResourceName } from "../origin/resources";
import type { PurgeRecord } from "./record";

export type Verdict = "ok" | "stale" | "gone";

/** The latest hard and soft purge of one id, per resource, and the log position of the latest of them. */
interface IdPurge {
  seq: number;
  times: Partial<Record<ResourceName, { hard: number; soft: number }>>;
}

const NO_MARKS = { hard: 0, soft: 0 } as const;

/**
 * What an isolate remembers of purges, bounded whatever a shop purges: the newest id purges (an entry per id; one forgotten was applied to
 * L1 and Redis), and as many (resource, tag) marks, here and in Redis's hash (log.ts), entries of about the same size; past it the oldest
 * fold into the floor.
 */
export const PURGES_REMEMBERED = 10_000;

/** The latest tag or all purges of one resource: what judging an entry needs of them. */
export interface WideMark {
  resource: ResourceName;
  /** null: an `all` purge. */
  tag: string | null;
  hard: number;
  soft: number;
}

/** A marks map key: the resource, and the tag (none for an `all` purge). */
function markKey(resource: ResourceName, tag: string | null): string {
  return tag === null ? resource : `${resource}|${tag}`;
}

export function createKnownPurges({ clock, wideRetentionMs }: { clock: Clock; wideRetentionMs: number }) {
  /**
   * The latest hard and soft tag/all purge of each resource and tag (markKey), as the marks hash in Redis keeps them (invalidation/log.ts):
   * judging an entry costs one lookup per tag, whatever the number of purges.
   */
  let marks = new Map<string, { hard: number; soft: number }>();
  /** Everything fetched before this was purged (hard): where dropped marks fold into. */
  let floor = 0;
  const recentIds = new Map<string, IdPurge>();
  /**
   * The log's era, and the position after which this isolate knows every id purge (Infinity: none yet). It rises when an id purge is
   * forgotten here (PURGES_REMEMBERED) or a record could not be read; it is set anew when the isolate starts over.
   */
  let era: string | null = null;
  let knownAfter = Number.POSITIVE_INFINITY;

  function raiseMark(mark: WideMark): void {
    const key = markKey(mark.resource, mark.tag);
    const known = marks.get(key);
    marks.delete(key); // re-insert: the Map's order is the eviction order
    marks.set(key, { hard: Math.max(known?.hard ?? 0, mark.hard), soft: Math.max(known?.soft ?? 0, mark.soft) });
    if (marks.size <= PURGES_REMEMBERED) return;
    const horizon = clock.now() - wideRetentionMs;
    for (const [key, { hard, soft }] of marks) if (Math.max(hard, soft) < horizon) marks.delete(key);
    while (marks.size > PURGES_REMEMBERED) {
      const [key, oldest] = marks.entries().next().value!;
      floor = Math.max(floor, oldest.hard, oldest.soft);
      marks.delete(key);
    }
  }

  function rememberWide(record: PurgeRecord): void {
    const times = { hard: 0, soft: 0, [record.mode]: record.at };
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
      const known = recentIds.get(id);
      // Re-inserted: the Map's order is the eviction order. An earlier purge of
      // other resources (or a hard one before this soft one) still holds.
      if (known) recentIds.delete(id);
      const times: IdPurge["times"] = known ? { ...known.times } : {};
      for (const resource of record.resources) {
        const was = times[resource] ?? NO_MARKS;
        times[resource] = { ...was, [record.mode]: Math.max(was[record.mode], record.at) };
      }
      recentIds.set(id, { seq: Math.max(known?.seq ?? 0, record.seq), times });
    }
    // The oldest go, in one pass: a fresh iterator per entry (entries().next())
    // walks past every slot deleted before it, quadratic over a re-price's page.
    let excess = recentIds.size - PURGES_REMEMBERED;
    if (excess <= 0) return;
    for (const [id, forgotten] of recentIds) {
      // A copy stamped before this purge can no longer be judged here.
      knownAfter = Math.max(knownAfter, forgotten.seq);
      recentIds.delete(id);
      if (--excess === 0) break;
    }
  }

  /** See PurgeWatcher.purgedAt. */
  function purgedAt(id: string, resource: ResourceName, tags: readonly string[]): PurgedAt {
    const wide = marksFor(resource, tags);
    const idPurge = recentIds.get(id)?.times[resource] ?? NO_MARKS;
    const hard = Math.max(floor, wide.hard, idPurge.hard);
    return { hard, any: Math.max(hard, wide.soft, idPurge.soft) };
  }

  return {
    /**
     * Remembers a purge: its tag/all marks, and its ids for judging. `keepIds` false: not its ids, as if forgotten (a bulk re-price's page
     * holds more ids than are kept, which would be forgotten before the page ends): copies stamped before it are no longer vouched for.
     */
    remember(record: PurgeRecord, keepIds: boolean): void {
      rememberWide(record);
      if (keepIds) rememberIds(record);
      else if (record.ids.length > 0) knownAfter = Math.max(knownAfter, record.seq);
    },

    /** Remembers a purge's tag/all marks alone, ahead of the records before it (its ids come when it is read in order). */
    rememberWide,

    /**
     * Forgets everything but the floor and starts over from the log's marks (a sync that could not catch up) at log position `at`, and
     * takes what the log's `latest` records say of id purges: it knows every id purge after the first of their unbroken run ending at `at`.
     */
    startOver(newFloor: number, newMarks: readonly WideMark[], at: PurgeStamp, latest: readonly PurgeRecord[]): void {
      marks = new Map();
      recentIds.clear();
      floor = Math.max(floor, newFloor);
      for (const mark of newMarks) raiseMark(mark);
      era = at.era;
      const numbers = new Set(latest.map((record) => record.seq));
      let first = at.seq;
      while (first > 0 && numbers.has(first)) first--;
      knownAfter = first;
      for (const record of [...latest].sort((a, b) => a.seq - b.seq)) if (record.seq > first && record.seq <= at.seq) rememberIds(record);
    },

    /**
     * The log was read from `from` up to `at` (a page of a sync that follows the log): what it returned was remembered; a number in between
     * that it did not return (a record no purge wrote, skipped) is a purge this isolate cannot know.
     */
    followed(from: number, at: PurgeStamp, records: readonly PurgeRecord[]): void {
      if (at.era !== era) {
        // The counter started again under this isolate's feet: nothing of the new era before now is known.
        era = at.era;
        knownAfter = at.seq;
        return;
      }
      const numbers = new Set(records.map((record) => record.seq));
      for (let seq = from + 1; seq <= at.seq; seq++) if (!numbers.has(seq)) knownAfter = Math.max(knownAfter, seq);
    },

    /**
     * Whether every id purge recorded after log position `stamp` is known here: then `judge` says all there is to say about a copy stamped
     * with it. No era is no knowledge: a copy stamped before the log had an era may predate purges Redis has since lost with its data.
     */
    vouches: (stamp: PurgeStamp): boolean => stamp.era !== "" && stamp.era === era && stamp.seq >= knownAfter,

    /**
     * What the purges known here make of an entry, from their times alone (the watcher adds what being blind does):
     * gone when fetched before a hard purge that applies to it (the floor, its id's, its tags' or all), else stale
     * when fetched before any purge that applies to it.
     */
    judge(entry: Entry, id: string, resource: ResourceName, tags: readonly string[]): Verdict {
      const at = purgedAt(id, resource, tags);
      return entry.fetchedAt < at.hard ? "gone" : entry.fetchedAt < at.any ? "stale" : "ok";
    },

    purgedAt,

    wideCount: () => marks.size,
  };
}
