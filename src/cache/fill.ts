// Filling one entry from the origin, once across isolates (design.md,
// "Coalescing"). Inside an isolate, lru-cache's `fetch` already shares one
// fill among concurrent callers; across isolates, the first to claim the
// Redis lock fetches and the others wait a bounded time for its result:
//
//   claim lock ──won──────────────▶ origin ─▶ write to L2 (version-guarded) + release lock
//        ├─fresh value in L2 ─────▶ use it
//        ├─lost ─▶ poll L2 (backoff, ≤ lockWaitMs) ─▶ use it, or fetch yourself
//        └─L2 unavailable ────────▶ origin (writes dropped)
import type { Config } from "../config";
import type { OriginClient } from "../origin/client";
import type { ResourceName } from "../origin/types";
import type { Clock } from "./clock";
import { decodeEntry, encodeEntry, sizeOfJson } from "./codec";
import { deadlinesFor, type Entry } from "./entry";
import { lockKey } from "./keys";
import type { L2 } from "./l2";

/** What one fill was about, and what it did (read by the caller that started it). */
export interface FillContext {
  resource: ResourceName;
  id: string;
  /** Hands background work (the L2 write) to `ctx.waitUntil`. */
  background: (work: Promise<unknown>) => void;
  /** Set by the fill: `origin` when this isolate fetched, `l2` when another isolate's result was used. */
  via?: "origin" | "l2";
}

export interface FillDeps {
  config: Config;
  origin: OriginClient;
  l2: L2 | null;
  clock: Clock;
  random: () => number;
  sleep: (ms: number) => Promise<void>;
}

/** First poll after losing the lock, doubled each time: the winner usually needs one origin round trip. */
const FIRST_POLL_MS = 10;

export function createFill(deps: FillDeps) {
  const { config, origin, l2, clock } = deps;

  async function fetchFromOrigin(context: FillContext): Promise<Entry> {
    const answer = await origin.fetchResource(context.resource, context.id);
    const data = answer.found ? answer.data : null;
    const deadlines = deadlinesFor(answer.found, config.policies[context.resource], clock.now(), config.ttlJitter, deps.random);
    return {
      data,
      version: answer.found ? answer.data.version : 0,
      ...deadlines,
      size: sizeOfJson(JSON.stringify(data).length),
    };
  }

  /** Polls L2 until a fresh entry appears or `lockWaitMs` is spent. A timeout is a reason to fetch, not an error. */
  async function waitForWinner(key: string): Promise<Entry | undefined> {
    const giveUpAt = clock.now() + config.lockWaitMs;
    for (let delay = FIRST_POLL_MS; clock.now() + delay <= giveUpAt; delay *= 2) {
      await deps.sleep(delay);
      const [value] = (await l2!.readMany([key])) ?? [undefined];
      if (value === undefined) return undefined; // L2 went away: stop waiting
      if (value === null) continue;
      const entry = await decodeEntry(value);
      if (entry && entry.freshUntil > clock.now()) return entry;
    }
    return undefined;
  }

  function storeInL2(key: string, entry: Entry, lockToken: string, context: FillContext): void {
    const write = encodeEntry(entry, config.compressAboveBytes).then((value) =>
      l2!.writeFill(key, lockKey(config.keyPrefix, key), value, entry.version, entry.errorUntil - clock.now(), lockToken),
    );
    context.background(write);
  }

  /** The lru-cache `fetchMethod`: resolves to a fresh entry or throws the OriginError. */
  return async function fill(key: string, context: FillContext): Promise<Entry> {
    if (!l2) {
      context.via = "origin";
      return fetchFromOrigin(context);
    }
    const lockToken = crypto.randomUUID();
    const claim = await l2.claimFill(key, lockKey(config.keyPrefix, key), lockToken, config.lockTtlMs, clock.now());
    if (claim?.kind === "fresh") {
      const entry = await decodeEntry(claim.value);
      if (entry) {
        context.via = "l2";
        return entry;
      }
    }
    if (claim?.kind === "lost") {
      const entry = await waitForWinner(key);
      if (entry) {
        context.via = "l2";
        return entry;
      }
    }
    const entry = await fetchFromOrigin(context);
    context.via = "origin";
    // The lock is released with the write; on an origin failure it simply expires.
    storeInL2(key, entry, claim?.kind === "won" ? lockToken : "", context);
    return entry;
  };
}
