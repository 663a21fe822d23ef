// Recording new product ids in Redis, for the isolates that did not see them added: the ADD
// script sets their bits in the current version and logs them for other isolates to catch up and
// for a build under way to merge. Ids Redis could not take are kept and retried at each check.
import type { L2 } from "../cache/l2/l2";
import { isValidProductId } from "../origin/types";
import { positionsOf, redisBitOf } from "./bloom";
import { ADMIN_LIMITS } from "../config/defaults";
import { KEY_TTL_MS, KNOWN_IDS_LIMITS } from "./limits";
import type { KnownIdsKeys } from "./keys";
import { parseMeta, type Meta } from "./meta";
import { readMeta } from "./redisFilter";
import { scriptsFor } from "./scripts";

export interface AddsOptions {
  l2: L2;
  keys: KnownIdsKeys;
  log: (event: Record<string, unknown>) => void;
  /** Accepts ids in this isolate at once, whatever Redis says. */
  acceptHere: (ids: readonly string[]) => void;
}

export function createAdds({ l2, keys, log, acceptHere }: AddsOptions) {
  const pending = new Set<string>();

  /** The arguments of the ADD script for `ids` against `meta`'s current and next versions. */
  function addCall(ids: string[], meta: Meta): { keys: string[]; args: (string | number)[] } {
    const { current, next } = meta;
    const callKeys = [keys.meta, current ? keys.log(current.version) : keys.meta, next ? keys.log(next.version) : keys.meta];
    const pairs: number[] = [];
    if (current) {
      const keyIndex = new Map<number, number>();
      const bits = new Uint32Array(current.k);
      for (const id of ids) {
        for (const bit of positionsOf(id, current, bits)) {
          const { segment, offset } = redisBitOf(bit);
          let index = keyIndex.get(segment);
          if (index === undefined) {
            callKeys.push(keys.segment(current.version, segment));
            keyIndex.set(segment, (index = callKeys.length - 3));
          }
          pairs.push(index, offset);
        }
      }
    }
    const stamp = `${current?.version ?? ""}/${next?.version ?? ""}`;
    return { keys: callKeys, args: [stamp, KEY_TTL_MS, KNOWN_IDS_LIMITS.logCap, ids.length, ...ids, ...pairs] };
  }

  /**
   * false: Redis did not answer. true also when there is nothing to record into: no
   * filter, or a damaged one, which readers ignore until a rebuild lists these ids.
   */
  async function record(ids: string[], knownMeta?: string): Promise<boolean> {
    let raw: string | null | undefined = knownMeta ?? (await readMeta(l2, keys));
    // A rebuild switching meanwhile changes the versions under us: recompute, a bounded number of times.
    for (let attempt = 0; attempt < 3; attempt++) {
      if (raw === undefined) return false;
      if (raw === null) return true;
      const meta = parseMeta(raw);
      if (!meta || meta.damaged || (!meta.current && !meta.next)) return true;
      const call = addCall(ids, meta);
      const reply = await l2.run((redis) => scriptsFor(redis).add(call.keys, call.args), { isWrite: true });
      if (reply === undefined) return false;
      if (reply[0] !== 0) return true; // recorded, or found no filter, or found a segment gone and marked the meta damaged
      raw = typeof reply[1] === "string" ? reply[1] : undefined;
    }
    return false;
  }

  return {
    /** See KnownIds.add. */
    async add(ids: string[]): Promise<boolean> {
      const unique = [...new Set(ids)];
      if (unique.length > ADMIN_LIMITS.ids) throw new RangeError(`at most ${ADMIN_LIMITS.ids} ids per add`);
      if (!unique.every(isValidProductId)) throw new RangeError("add() takes valid product ids only");
      if (unique.length === 0) return true;
      acceptHere(unique);
      if (await record(unique)) return true;
      // Kept up to what the add log holds: once recorded, more would put every other isolate past the log's window
      // (copy.ts), which then reloads the whole filter anyway, and a build under way could not hold them.
      for (const id of unique) if (pending.size < KNOWN_IDS_LIMITS.logCap) pending.add(id);
      log({ event: "known_ids_add_unrecorded", ids: unique.length, pending: pending.size });
      return false;
    },

    /** Retries ids whose add could not be recorded, one bounded batch, against the meta a check just read. */
    async retryPending(meta: string): Promise<void> {
      if (pending.size === 0) return;
      const batch = [...pending].slice(0, ADMIN_LIMITS.ids);
      if (!(await record(batch, meta))) return;
      batch.forEach((id) => pending.delete(id));
    },

    pending: () => pending.size,
  };
}
