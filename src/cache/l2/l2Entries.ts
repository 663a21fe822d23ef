// Entries read from L2 (docs/architecture.md#keys-and-values-in-redis) for the read path and the fill: decoded and checked (codec.ts), or a
// miss. A value that is not a valid entry never reaches L1: it is counted, logged, and deleted from L2 in the background if still there.
import type { Background } from "../../shared/subrequests";
import type { Config, ResourcePolicy } from "../../config";
import { createRateLimitedLog, type RateLimitedLog } from "../../shared/log";
import type { ResourceName, ResourceTypes } from "../../origin/resources";
import type { Clock } from "../../shared/clock";
import { decodeEntry, HEADER_MAX_CHARS } from "./codec";
import { type Entry, TTL_JITTER } from "../entry";
import type { L2 } from "./l2";
import { DEFAULTS } from "../../config/defaults";

// Deletes KEYS[1] only while it still starts with ARGV[1], the first characters of the bad value (all of it when ARGV[2] is '1'): as many
// as the longest header (codec.ts, HEADER_MAX_CHARS), so they hold a whole header, version and fetch time to the millisecond, and a value a
// fill wrote since differs there. Only those characters travel, whatever the size of the value.
const DELETE_IF_STILL_BAD = `
if redis.call('GETRANGE', KEYS[1], 0, #ARGV[1] - 1) ~= ARGV[1] then return 0 end
if ARGV[2] == '1' and redis.call('STRLEN', KEYS[1]) ~= #ARGV[1] then return 0 end
return redis.call('DEL', KEYS[1])
`;

export interface L2ValueStats {
  /** Values read from L2 that were not valid entries (each read counts). */
  rejected: number;
  /** Of those, the ones deleted from L2. */
  deleted: number;
}

export interface L2Entries {
  /** The entry `value` (read from L2 at `key`) holds for this resource and id, or undefined: a miss. */
  read<R extends ResourceName>(key: string, value: string, resource: R, id: string, background: Background): Entry<ResourceTypes[R]> | undefined;
  readonly stats: Readonly<L2ValueStats>;
}

/**
 * The longest any deadline of an entry may lie past its fetch under `policy`: its freshness, and a tenth more for copies that earlier
 * releases wrote (their jitter also lengthened a TTL by up to TTL_JITTER; this one's only shortens it: entry.ts), then the longer of its
 * grace windows or the one a soft purge gives. Entries that claim more were written under another policy, or not by a fill.
 */
export function longestLifeMs(policy: ResourcePolicy): number {
  const freshMs = Math.ceil(Math.max(policy.ttl, policy.negativeTtl) * (1 + TTL_JITTER) * 1000);
  return freshMs + Math.max(policy.swr * 1000, policy.staleIfError * 1000, DEFAULTS.softPurgeGraceMs);
}

export function createL2Entries(deps: { config: Config; l2: L2 | null; clock: Clock; log?: RateLimitedLog }): L2Entries {
  const { config, l2, clock } = deps;
  const log = deps.log ?? createRateLimitedLog({ intervalMs: DEFAULTS.logEveryMs, clock });
  const stats: L2ValueStats = { rejected: 0, deleted: 0 };

  async function deleteIfStillBad(l2: L2, key: string, value: string): Promise<void> {
    const whole = value.length <= HEADER_MAX_CHARS;
    // Not half a surrogate pair: it would not travel as the same bytes.
    const head = whole ? value : value.slice(0, HEADER_MAX_CHARS).replace(/[\uD800-\uDBFF]$/, "");
    const deleted = await l2.runOnKeys([key], (redis, keys) => redis.eval<string[], number>(DELETE_IF_STILL_BAD, keys, [head, whole ? "1" : "0"]), {
      isWrite: true,
    });
    stats.deleted += deleted?.reduce((sum, n) => sum + n, 0) ?? 0;
  }

  return {
    stats,
    read(key, value, resource, id, background) {
      const decoded = decodeEntry(value, { resource, id, now: clock.now(), maxLifeMs: longestLifeMs(config.policies[resource]) });
      if ("entry" in decoded) return decoded.entry;
      stats.rejected++;
      log(decoded.invalid, "l2_invalid_value", { key, resource, reason: decoded.invalid, chars: value.length }, "warn");
      if (l2) background(deleteIfStillBad(l2, key, value));
      return undefined;
    },
  };
}
