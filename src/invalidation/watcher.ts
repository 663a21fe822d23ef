// How each isolate learns of purges (docs/architecture.md#invalidation: the bound, bulk re-prices read page by page, the reads a data
// center's isolates share, blindness): it reads the purge log at most every `pollMs` (a quarter of it and a random part of a quarter more
// in the background), drops or marks its L1 entries for id purges, and keeps tag and all purges to judge what it serves (knownPurges.ts).
import type { Clock } from "../shared/clock";
import type { Entry } from "../cache/entry";
import { entryKey } from "../cache/keys";
import type { L1Purging, PurgedAt } from "../cache/readThrough";
import type { ReadAlong } from "../cache/l2/l2";
import type { PurgeStamp } from "../cache/location/purgeStamp";
import type { ResourceName } from "../origin/resources";
import { createKnownPurges, PURGES_REMEMBERED, type Verdict } from "./knownPurges";
import { logPosition, logPositionKeys, PAGE_MAX_BYTES, type PurgeLog, type PurgesSince } from "./log";
import type { PurgeRecord } from "./record";
import { pauses, pollUntil, within } from "../shared/leases";
import { gatePlaceMs, subrequestsLeft, type Background } from "../shared/subrequests";
import { DEFAULTS } from "../config/defaults";
import type { LogShelf, SharedPage, SharedPosition } from "./sharedReads";

export interface PurgeWatcherOptions {
  log: PurgeLog | null;
  l1: L1Purging;
  clock: Clock;
  keyPrefix: string;
  pollMs: number;
  /** How long a tag/all purge matters: the longest an entry can live. */
  wideRetentionMs: number;
  /** Blind, entries fetched longer ago than this are taken as stale (tier.ts: a soft purge's grace). */
  blindMaxAgeMs: number;
  /** L1_MAX_BYTES: one sync reads no more of the log than L1 holds; past it, re-reading L1's pages from Redis costs less, and it starts over. */
  l1MaxBytes: number;
  /** Longest a request waits for a sync another request started (its L2 read's budget, and some). */
  syncWaitMs: number;
  /** Where the data center's isolates share their reads of the log (null: the location tier is off). */
  shared?: LogShelf | null;
  /** Waits `ms` (a wait for another isolate's read of the log); setTimeout unless given. */
  sleep?: (ms: number) => Promise<void>;
  /**
   * Told, once a sync ends, how long after its recording each purge it applied reached this isolate, with the sync's `background` (the
   * fleet's purge reach: observability/fleet.ts bounds the points one sync writes).
   */
  reached?: (reaches: readonly PurgeReach[], background: Background) => void;
  random?: () => number;
}

/** How long after its recording a purge reached this isolate. */
interface PurgeReach {
  mode: PurgeRecord["mode"];
  ms: number;
}

export type PurgeWatcher = ReturnType<typeof createPurgeWatcher>;

/**
 * What the read path asks of the purges (cache/readThrough.ts's PurgeKnowledge), from a watcher made after it: the watcher purges the read
 * path's L1, so the read path is made first, and each question goes to whatever `watcher()` returns by the time it is asked.
 */
export function knowledgeOf(watcher: () => PurgeWatcher) {
  return {
    judge: (...args: Parameters<PurgeWatcher["judge"]>) => watcher().judge(...args),
    purgedAt: (...args: Parameters<PurgeWatcher["purgedAt"]>) => watcher().purgedAt(...args),
    stamp: () => watcher().stamp(),
    vouches: (stamp: PurgeStamp) => watcher().vouches(stamp),
    readAlong: () => watcher().readAlong(),
    unsureBefore: () => watcher().unsureBefore(),
  };
}

export type PurgeWatcherStatus = ReturnType<PurgeWatcher["status"]>;

/**
 * How long a sync may run before the next request starts another: the log's reads have the background budget (a visitor waits for one at
 * most `syncWaitMs`; invalidation/log.ts), as long as its place in the subrequest gate is held (shared/subrequests.ts, gatePlaceMs).
 * Renewed at each page of a bulk re-price.
 */
export const SYNC_LEASE_MS = gatePlaceMs(DEFAULTS.backgroundCallMs);

/**
 * The index of the first of a page's records whose ids are worth remembering: the ids of the records before it would be forgotten before
 * the page ends (PURGES_REMEMBERED are kept, the newest), so they are applied to L1 and not remembered (KnownPurges.remember).
 */
function firstWithIdsKept(records: readonly PurgeRecord[]): number {
  let kept = 0;
  for (let index = records.length - 1; index >= 0; index--) {
    kept += records[index]!.ids.length;
    if (kept > PURGES_REMEMBERED) return index + 1;
  }
  return 0;
}

/**
 * A sync under way, as a lease (src/shared/leases.ts): its deadline, renewed at each page; when its first page's read was sent, once it
 * reads the rest in the background (null: not yet, or not so); and what lets the visitors waiting for that page go on.
 */
interface SyncLease {
  until: number;
  /** A visitor waits for it (the isolate's knowledge is past the bound): it waits for no other isolate's read. */
  urgent: boolean;
  startedAt: number;
  behindSince: number | null;
  /** Where the log stood when the sync began reading ahead: the rest it has yet to read ends there. */
  aheadUpTo: number;
  firstPageRead: () => void;
  /** How long after its recording each purge the sync applied reached this isolate: told to `reached` once the sync ends. */
  reaches: PurgeReach[];
}

export function createPurgeWatcher(options: PurgeWatcherOptions) {
  const { log, l1, clock, keyPrefix } = options;
  const shared = options.shared ?? null;
  const random = options.random ?? Math.random;
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  let seq = 0;
  /** The log's era as last read (null: never read). */
  let era: string | null = null;
  // Never synced: the first request syncs before it is served.
  let lastSyncAt = -Infinity;
  /** When the next background sync is due: a quarter of a poll after lastSyncAt, and a random part of a quarter more. */
  let backgroundDueAt = -Infinity;
  let logReads = 0;
  let sharedReadsTaken = 0;
  /** When the last read of the log that Redis answered was sent: a sync reading a re-price page by page is not blind. */
  let lastAnsweredAt = -Infinity;
  /** Notes what a read of the log sent at `sentAt` got: whether Redis answered it (lastReadAnswered), and if so, when it was sent. */
  function heard<T>(answer: T | undefined, sentAt: number): T | undefined {
    lastReadAnswered = answer !== undefined;
    if (answer !== undefined) lastAnsweredAt = Math.max(lastAnsweredAt, sentAt);
    return answer;
  }
  function syncedAt(at: number): void {
    if (at <= lastSyncAt) return;
    lastSyncAt = at;
    backgroundDueAt = at + (options.pollMs / 4) * (1 + random());
  }
  /** The sync under way (SyncLease): if its request vanishes, the next request starts another once it lapses. */
  let syncing: SyncLease | null = null;
  /** Whether Redis answered the last read of the log: while it does not, no visitor waits for the next sync (they go on in the background, one at a time). */
  let lastReadAnswered = true;
  /** Sync answers applied so far: a sync applies its answer only if none was applied since it started. */
  let syncsApplied = 0;
  const known = createKnownPurges(options);
  const positionKeys = logPositionKeys(keyPrefix);

  function apply(record: PurgeRecord, keepIds = true): void {
    known.remember(record, keepIds);
    for (const id of record.ids) {
      for (const resource of record.resources) {
        const key = entryKey(keyPrefix, resource, id);
        if (record.mode === "hard") l1.forget(key);
        else l1.markStale(key, record.at);
      }
    }
    // The next purge in sequence (one this isolate recorded itself, or the
    // next of a sync): nothing before it is missing, so the sync need not read it again.
    if (record.seq === seq + 1) seq = record.seq;
  }

  /**
   * Reads the log from where this isolate stands and applies it: the records that follow, page by page, or, for an isolate that cannot
   * follow the log, a start over. Its `lease` is renewed while pages come in, and says when the visitors waiting may go on (after the first
   * page, if the rest can wait).
   */
  async function syncNow(lease: SyncLease, background: Background): Promise<void> {
    if (!log) return;
    if (shared && era && (await followedShelf(shared, lease, background))) return;
    // Visitors wait for the read this sync sends from now (syncWaitMs), not for its wait on another isolate's.
    lease.startedAt = clock.now();
    const appliedBefore = syncsApplied;
    // When the read now going out was sent: what it finds holds as of then, not as of its reply, which a
    // Redis that was paused or slow gives seconds later, after purges recorded meanwhile (each page's own).
    let sentAt = clock.now();
    logReads++;
    // Told to the data center: its isolates that stand here wait for this read rather than send the same one.
    const sharing = shared && era ? { shelf: shared, era, from: seq } : null;
    sharing?.shelf.putReading({ era: sharing.era, from: sharing.from, since: sentAt }, background);
    /** Where the read out now starts: its page is shared under it. */
    let readFrom = seq;
    const pagesPut: Promise<unknown>[] = [];
    let answer = heard(await log.readSince(seq, era), sentAt);
    if (!answer) return; // L2 unavailable: stay as we are; `blind` tells how long
    const at = { era: answer.era, seq: answer.seq };
    // A log with no era (never written, or lost with Redis's data) is given one, taken at once if no purge came in between (else the next
    // sync reads both); without one, this isolate neither stamps nor vouches for a copy (KnownPurges.vouches).
    if (at.era === "") {
      const started = await log.startEra();
      if (started?.seq === at.seq) at.era = started.era;
    }
    // Another sync applied its answer meanwhile (this one outlived its lease: a slow Redis, or its era's start): this answer was read
    // against a position the isolate has left, and would take it back or start it over once more (a new isolate's first syncs, under a
    // burst). Dropped: the next sync reads from where the isolate stands.
    if (syncsApplied !== appliedBefore) return;
    for (let pages = 1; ; pages++) {
      const mine = ++syncsApplied;
      if (!answer.follows) {
        // New isolate, too far behind, or the log was reset: start over from the tag/all marks, L1 kept for the
        // origin's failures only (docs/architecture.md, "Bulk purges", says why it is kept).
        l1.keepOnlyForErrors(clock.now());
        known.startOver(answer.floor, answer.marks, at, answer.records);
        break;
      }
      if (sharing && at.era === sharing.era) pagesPut.push(sharePage(sharing.shelf, sharing.era, readFrom, answer, background));
      followPage(answer.records, answer.upTo, at.era, lease);
      if (answer.upTo >= answer.seq) break;
      // More to read, in the background: with every tag and all purge ahead known, the visitors waiting go on,
      // unsure of L1 copies older than this read (docs/architecture.md, "Bulk purges"). Without, they wait as for any sync.
      if (pages === 1 && answer.wideAhead) {
        for (const record of answer.wideAhead) known.rememberWide(record);
        lease.behindSince = sentAt;
        lease.aheadUpTo = answer.seq;
        lease.firstPageRead();
      }
      // Past L1's bytes of log read in one sync, starting over costs less (options.l1MaxBytes).
      lease.until = clock.now() + SYNC_LEASE_MS;
      sentAt = clock.now();
      readFrom = seq;
      const readOn = (pages + 1) * PAGE_MAX_BYTES <= options.l1MaxBytes;
      const next = heard(readOn ? await log.readSince(seq, era) : await log.readSince(0, null), sentAt);
      // L2 failed mid-way (the next sync goes on from here: this isolate's knowledge stays as old as its last complete read), or another
      // sync took over (this one's lease ran out on a slow read).
      if (!next || syncsApplied !== mine) return;
      answer = next;
      Object.assign(at, { era: answer.era, seq: answer.seq });
    }
    // Following, the last page's followPage has brought `seq` there already.
    if (!answer.follows) seq = answer.seq;
    era = at.era;
    syncedAt(sentAt);
    // Shared as of the last page's sending, which found the log at `answer.seq`: any purge recorded before then is known here.
    // Its pages lead there from where the sync read from, each under the number the next starts after; the position goes once they are put.
    if (era && answer.follows)
      shared?.put({ era, seq: answer.seq, readAt: sentAt, from: sharing?.era === era ? sharing.from : answer.seq }, background, Promise.all(pagesPut));
  }

  /**
   * Applies a page of the log that follows from where this isolate stands (read from Redis, or from the data center's shelf), all at once:
   * a visitor served between two of its purges could be shown a page a later one purged.
   */
  function followPage(records: readonly PurgeRecord[], upTo: number, pageEra: string, lease: SyncLease): void {
    const from = seq;
    const idsKeptFrom = firstWithIdsKept(records);
    for (const [index, record] of records.entries()) {
      apply(record, index >= idsKeptFrom);
      lease.reaches.push({ mode: record.mode, ms: clock.now() - record.at });
    }
    known.followed(from, { era: pageEra, seq: upTo }, records);
    // Never back: a purge this isolate recorded itself while the read was out is known (apply) though the read predates it.
    seq = Math.max(seq, upTo);
    era = pageEra;
  }

  /**
   * Takes the data center's reads of the log instead of reading it, as docs/architecture.md#invalidation says when (a read sent after this
   * isolate's knowledge, not in the future; young enough to stand for its own; a background sync waiting for one under way, within the
   * bound). True when the sync is done; false, and the isolate reads the log itself from as far as it got.
   */
  async function followedShelf(shelf: LogShelf, lease: SyncLease, background: Background): Promise<boolean> {
    const newer = (found: SharedPosition | undefined): found is SharedPosition =>
      found !== undefined && found.era === era && found.seq >= seq && found.readAt > lastSyncAt && found.readAt <= clock.now();
    const young = (found: SharedPosition) => clock.now() - found.readAt < options.pollMs / 2;
    const found = await shelf.read();
    if (newer(found)) {
      if (!(await followRead(shelf, lease, found, background))) return false;
      if (young(found)) return true;
    }
    if (lease.urgent) return false;
    const reading = await shelf.reading();
    if (!reading || reading.era !== era || reading.from > seq || reading.since <= lastSyncAt || reading.since > clock.now()) return false;
    const until = lastSyncAt + options.pollMs - options.syncWaitMs;
    const before = syncsApplied;
    // Looks at most half a sync wait apart: a read that lands is taken up within the wait of a visitor behind this sync.
    for (const pause of pauses(DEFAULTS.lockPollFirstMs, options.syncWaitMs / 2, until, clock.now)) {
      if (syncsApplied !== before) return false;
      await sleep(pause);
      const landed = await shelf.read();
      if (newer(landed)) return (await followRead(shelf, lease, landed, background)) && young(landed);
    }
    return false;
  }

  /**
   * Follows a read another isolate shared up to where it found the log: its pages, each kept under the number the next starts after, from
   * this isolate's number; behind the read's start, the purges up to it come from Redis (readUpTo). False when a page is missing on the
   * way, or another sync's answer was applied meanwhile.
   */
  async function followRead(shelf: LogShelf, lease: SyncLease, target: SharedPosition, background: Background): Promise<boolean> {
    let mine = syncsApplied;
    let from = Math.min(seq, target.from);
    while (seq < target.seq) {
      const page = (await shelf.page(target.era, from)) ?? (from < target.from ? await readUpTo(shelf, target.from, background) : undefined);
      if (!page || page.upTo <= seq || syncsApplied !== mine) return false;
      mine = ++syncsApplied;
      const unread = page.records.filter((record) => record.seq > seq);
      followPage(unread, page.upTo, target.era, lease);
      from = page.upTo;
      lease.until = clock.now() + SYNC_LEASE_MS;
    }
    if (syncsApplied !== mine) return false;
    syncedAt(target.readAt);
    sharedReadsTaken++;
    return true;
  }

  /**
   * The purges from where this isolate stands up to `upTo` (the start of a read another isolate shared), read from Redis: no more than
   * those, the rest being on the shelf. Shared in turn, for the isolates that stand here too. Undefined when Redis does not answer or the
   * log cannot be followed from here (the sync then reads it as any other).
   */
  async function readUpTo(shelf: LogShelf, upTo: number, background: Background): Promise<SharedPage | undefined> {
    const [from, sentAt] = [seq, clock.now()];
    logReads++;
    const answer = heard(await log!.readSince(from, era, upTo - from), sentAt);
    if (!answer?.follows || answer.era !== era || !answer.members?.length) return undefined;
    void sharePage(shelf, answer.era, from, answer, background);
    return { upTo: answer.upTo, records: answer.records };
  }

  /**
   * Shares a page of the log read from Redis from `from`, when the invocation has a subrequest to spare for its put beside the next read's
   * (the runtime caps them: a catch-up's reads come first). Settles once it is put, given up, or not shared.
   */
  function sharePage(shelf: LogShelf, pageEra: string, from: number, answer: PurgesSince, background: Background): Promise<unknown> {
    if (!answer.members?.length || subrequestsLeft() < 2) return Promise.resolve();
    return shelf.putPage(pageEra, { from, upTo: answer.upTo, members: answer.members }, background);
  }

  /** Starts a sync in this request, unless one is under way: then `undefined` (this request does not await another's). What it gives settles once its first page is applied. */
  function startSync(background: Background, urgent: boolean): Promise<void> | undefined {
    if (syncUnderWay()) return undefined;
    let firstPageRead = () => {};
    const firstPage = new Promise<void>((resolve) => (firstPageRead = resolve));
    const lease: SyncLease = {
      until: clock.now() + SYNC_LEASE_MS,
      urgent,
      startedAt: clock.now(),
      behindSince: null,
      aheadUpTo: 0,
      firstPageRead,
      reaches: [],
    };
    const work = syncNow(lease, background).finally(() => {
      if (lease.reaches.length > 0) options.reached?.(lease.reaches, background);
      if (syncing === lease) syncing = null;
      firstPageRead();
    });
    syncing = lease;
    background(work.catch(() => undefined));
    return firstPage;
  }

  const syncUnderWay = () => syncing !== null && syncing.until > clock.now();
  /** The sync under way has read its first page and goes on in the background. */
  const readingAhead = () => syncUnderWay() && syncing!.behindSince !== null;

  /**
   * Blind: no read of the log answered for a poll (the bound) and the whole lease of the sync then due: that
   * read failed, and purges may go by unheard. Counted from the poll, long polls are never blind between them.
   */
  const blind = () => log !== null && clock.now() - Math.max(lastSyncAt, lastAnsweredAt) > options.pollMs + SYNC_LEASE_MS;

  return {
    /** Brings this isolate's knowledge of purges up to date when it is getting old (see the bound above). */
    async sync(background: Background): Promise<void> {
      if (!log) return;
      const age = clock.now() - lastSyncAt;
      // Due, and Redis answered the last read: the visitor waits for the sync (the bound). Otherwise it goes on in the background.
      if (age >= options.pollMs && lastReadAnswered) {
        const mine = startSync(background, true);
        // Another request's sync is watched for on this request's own timers (shared/leases.ts, pollUntil), only within `syncWaitMs` of its
        // start: a read running longer is one Redis is slow to answer, and the visitors after the first do not each wait for it in turn.
        const until = Math.min(clock.now(), syncing?.startedAt ?? Number.POSITIVE_INFINITY) + options.syncWaitMs;
        if (mine) await within(mine, options.syncWaitMs, () => undefined);
        else await pollUntil(() => (syncUnderWay() && !readingAhead() ? undefined : true), until, clock.now);
      } else if (clock.now() >= backgroundDueAt) {
        void startSync(background, false);
      }
    },

    /** What the purges known here make of an entry: still good, stale (soft purge), or gone (hard purge). */
    judge(entry: Entry, id: string, resource: ResourceName, tags: readonly string[]): Verdict {
      const verdict = known.judge(entry, id, resource, tags);
      if (verdict === "ok" && blind() && clock.now() - entry.fetchedAt > options.blindMaxAgeMs) return "stale";
      return verdict;
    },

    /**
     * When the resource was last purged as far as this isolate knows (0: never): `hard`, by a hard purge (older copies are gone), and
     * `any`, by any purge (older copies are at best stale: a refresh must not take one back as fresh).
     */
    purgedAt: (id: string, resource: ResourceName, tags: readonly string[]): PurgedAt => known.purgedAt(id, resource, tags),

    /**
     * While a sync reads a log that holds purges it has not read yet: copies fetched before this may have been purged by them, and are not
     * served from L1 as they are (0: none; docs/architecture.md, "Bulk purges").
     */
    unsureBefore: (): number => (readingAhead() ? syncing!.behindSince! : 0),

    /** Applies a purge this isolate just recorded, without waiting for the next poll. */
    apply: (record: PurgeRecord): void => apply(record),

    /** The log position this isolate has read up to (null: not yet read): what a copy fetched from now on is stamped with. */
    stamp: (): PurgeStamp | null => (era ? { era, seq } : null),

    /**
     * Whether this isolate knows every id purge after `stamp` (see KnownPurges.vouches). Not a copy stamped
     * before the end of what a sync reading ahead has yet to read: it may predate those purges.
     */
    vouches: (stamp: PurgeStamp): boolean => known.vouches(stamp) && !(readingAhead() && stamp.seq < syncing!.aheadUpTo),

    /**
     * What a lock claim going out now reads along (cache/l2/outbox.ts): the log's position, once this isolate's knowledge is a quarter of
     * `pollMs` old (null: not now); where the log stands as read, it synced then.
     */
    readAlong(): ReadAlong | null {
      const sentAt = clock.now();
      // Not without an era: the syncs that give the log one must go on.
      if (!log || !era || sentAt - lastSyncAt < options.pollMs / 4) return null;
      return {
        keys: positionKeys,
        read(values: readonly (string | null)[]) {
          // Read after `sentAt`: any purge recorded before then has a number at most this one.
          const position = logPosition(values);
          if (position && position.era === era && position.seq === seq) syncedAt(sentAt);
        },
      };
    },

    /** `logReads`: syncs that read the log in Redis; `sharedReadsTaken`: those that took a read another isolate of the data center shared instead. */
    status: () => ({ seq, lastSyncAt, blind: blind(), widePurges: known.wideCount(), logReads, sharedReadsTaken }),
  };
}
