// Building a new version of the filter from the origin's listing, and switching to it without
// a window in which a reader sees half a filter or an id created meanwhile goes missing:
//
//   1. announce the new version in meta.next: from now on add() also logs
//      new ids for it;
//   2. list every id (pages of 1000) into an in-memory filter; if the catalog
//      outgrew the filter, start again once, sized for the count plus the room;
//   3. merge the ids logged meanwhile, write the segments (fresh TTLs);
//   4. switch meta in one script, which refuses while more ids were logged
//      than merged (merge those, retry) or when a newer build replaced ours;
//   5. let the previous version's keys expire once no check can still be loading them.
import type { L2 } from "../cache/l2/l2";
import type { Clock } from "../shared/clock";
import type { OriginClient } from "../origin/client";
import { Bloom, bloomShape, byteLengthFor, capacityFor, positionsOf, redisBitOf, segmentCountFor } from "./bloom";
import { KEY_TTL_MS, KNOWN_IDS_LIMITS } from "./limits";
import { newVersion, type KnownIdsKeys } from "./keys";
import { parseMeta, type FilterMeta } from "./meta";
import { expireVersion, readLog, readMeta, writeFilter } from "./redisFilter";
import { scriptsFor } from "./scripts";

/** One page of the origin's listing (`GET /products?cursor=&limit=`). */
export type ListIds = (cursor: string | null) => Promise<{ ids: string[]; next: string | null }>;

export interface RebuildProgress {
  /** 1, or 2 when the first pass found the catalog larger than the capacity. */
  pass: number;
  ids: number;
  pages: number;
  ms: number;
}

/** The filter built (`count`: the ids listed, plus those added during the build), and how the build went. */
export type RebuildResult = Pick<FilterMeta, "version" | "count" | "capacity" | "fpRate" | "m" | "k" | "builtAt"> & {
  pages: number;
  passes: number;
  segments: number;
  bytes: number;
  /** Ids added (by product creations) while the build ran, merged into it. */
  mergedAdds: number;
  /** The catalog is larger than the largest allowed filter: its false-positive rate is above fpRate (never a false negative). */
  overCapacity: boolean;
  ms: number;
};

export type RebuildFailure = "l2-unavailable" | "superseded" | "log-overflow" | "origin-listing";

export class KnownIdsRebuildError extends Error {
  constructor(
    readonly failure: RebuildFailure,
    message: string,
  ) {
    super(`known-ids rebuild: ${message}`);
    this.name = "KnownIdsRebuildError";
  }
}

export interface RebuildContext {
  l2: L2;
  keys: KnownIdsKeys;
  clock: Clock;
  /** Ids the filter holds beyond the catalog it is built from (KNOWN_IDS_DEFAULTS.room). */
  room: number;
  fpRate: number;
}

/** The origin client's listing, in the contract's largest pages (docs/origin-contract.md#listing: n ≤ 1000). */
export function listingOf(origin: Pick<OriginClient, "listProductIds">): ListIds {
  return (cursor) => origin.listProductIds(cursor, 1000);
}

function must<T>(value: T | undefined, step: string): T {
  if (value === undefined) throw new KnownIdsRebuildError("l2-unavailable", `L2 unavailable (${step})`);
  return value;
}

export async function rebuildFilter(
  ctx: RebuildContext,
  listIds: ListIds,
  onProgress?: (progress: RebuildProgress) => void,
): Promise<{ result: RebuildResult; bloom: Bloom; filter: FilterMeta }> {
  const { l2, keys, clock, fpRate } = ctx;
  const started = performance.now();
  const largest = capacityFor(KNOWN_IDS_LIMITS.maxBytes, fpRate);
  /** Room over `count` ids, never above the largest filter. */
  const sizedFor = (count: number) => Math.min(largest, count + ctx.room);
  const previous = must(await readMeta(l2, keys), "reading meta");
  // The last build's count, with room to grow.
  let capacity = sizedFor((previous === null ? null : parseMeta(previous))?.current?.count ?? 0);

  for (let pass = 1; ; pass++) {
    const version = newVersion(clock.now());
    must(await l2.run((redis) => scriptsFor(redis).announce(keys.meta, version, clock.now(), KEY_TTL_MS), { isWrite: true }), "announce");
    try {
      const bloom = Bloom.withCapacity(capacity, fpRate);
      const listed = await listAll(listIds, bloom, largest, (ids, pages) => onProgress?.({ pass, ids, pages, ms: performance.now() - started }));
      if (listed.count > capacity && capacity < largest && pass === 1) {
        // Over capacity the false-positive rate climbs: list again into a larger filter.
        // The next announce replaces this version, which is then never switched to.
        capacity = sizedFor(listed.count);
        continue;
      }
      const filter = await publish(ctx, version, bloom, capacity, listed.count);
      const result: RebuildResult = {
        version,
        count: filter.count,
        pages: listed.pages,
        passes: pass,
        capacity,
        fpRate,
        m: bloom.m,
        k: bloom.k,
        segments: filter.segmentCount,
        bytes: byteLengthFor(bloom.m),
        mergedAdds: filter.changedAt,
        overCapacity: listed.count > capacity,
        builtAt: filter.builtAt,
        ms: Math.round(performance.now() - started),
      };
      return { result, bloom, filter };
    } catch (error) {
      // Best effort: stop add() logging for a build that will never switch, and drop what it wrote (nobody reads it).
      await l2.run((redis) => scriptsFor(redis).abandon(keys.meta, version), { isWrite: true });
      await expireVersion(l2, keys, version, segmentCountFor(bloomShape(capacity, fpRate).m), 0);
      throw error;
    }
  }
}

/** Pages through the whole listing into `bloom`. Bounded: a listing that does not end is an error. */
async function listAll(
  listIds: ListIds,
  bloom: Bloom,
  largest: number,
  progress: (ids: number, pages: number) => void,
): Promise<{ count: number; pages: number }> {
  let cursor: string | null = null;
  let count = 0;
  let pages = 0;
  let emptyInARow = 0;
  do {
    let page: { ids: string[]; next: string | null };
    try {
      page = await listIds(cursor);
    } catch (error) {
      throw new KnownIdsRebuildError("origin-listing", `listing page ${pages + 1} failed: ${error instanceof Error ? error.message : String(error)}`);
    }
    pages++;
    for (const id of page.ids) bloom.add(id);
    count += page.ids.length;
    emptyInARow = page.ids.length === 0 ? emptyInARow + 1 : 0;
    // More ids than twice the largest filter holds: the listing has lost its way (a cursor loop).
    if (count > 2 * largest || emptyInARow > 10 || (page.next !== null && page.next === cursor)) {
      throw new KnownIdsRebuildError("origin-listing", `the listing does not end (${count} ids in ${pages} pages)`);
    }
    cursor = page.next;
    progress(count, pages);
  } while (cursor !== null);
  return { count, pages };
}

/** Steps 3 to 5: merge the ids logged during the build, write the segments, switch, retire the old version. */
async function publish(ctx: RebuildContext, version: string, bloom: Bloom, capacity: number, listed: number): Promise<FilterMeta> {
  const { l2, keys, clock } = ctx;
  const all = Array.from({ length: segmentCountFor(bloom.m) }, (_, i) => i);
  let merged = 0;

  // Round 1 merges the whole log and writes every segment. The switch refuses while more ids were logged than merged (products created
  // between a merge and the switch): the next round merges those, rewrites the segments they touched, and switches again. Bounded by
  // the log: each further round merges at least one more id, and past logCap ids the switch refuses for good (log-overflow).
  for (let attempt = 0; ; attempt++) {
    const more = must(await readLog(l2, keys, version, merged), "reading the build's log");
    const touched = new Set<number>();
    for (const id of more) {
      bloom.add(id);
      for (const bit of positionsOf(id, bloom)) touched.add(redisBitOf(bit).segment);
    }
    must(await writeFilter(l2, keys, version, bloom, attempt === 0 ? all : [...touched], KEY_TTL_MS), "writing segments");
    merged += more.length;
    const filter: FilterMeta = {
      version,
      capacity,
      fpRate: ctx.fpRate,
      m: bloom.m,
      k: bloom.k,
      segmentCount: all.length,
      count: listed + merged,
      builtAt: clock.now(),
      changedAt: merged,
    };
    // The meta it stores has no `next`: the build is over.
    const reply = must(
      await l2.run((redis) => scriptsFor(redis).switchTo(keys.meta, keys.log(version), version, JSON.stringify(filter), merged, KEY_TTL_MS), { isWrite: true }),
      "switching",
    );
    switch (reply[0]) {
      case 0:
        throw new KnownIdsRebuildError("superseded", "another rebuild started meanwhile; its version wins");
      case 1:
        throw new KnownIdsRebuildError("log-overflow", `more than ${KNOWN_IDS_LIMITS.logCap} ids were added during the build; run it again`);
      case 2:
        continue;
      default: {
        const old = typeof reply[1] === "string" && reply[1] !== "" ? parseMeta(reply[1])?.current : null;
        // Isolates loading the old version when the switch came finish within their check's lease.
        if (old && old.version !== version) await expireVersion(l2, keys, old.version, old.segmentCount, KNOWN_IDS_LIMITS.checkLeaseMs);
        return filter;
      }
    }
  }
}
