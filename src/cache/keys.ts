// Redis keys: short, prefixed, versioned and built only from validated ids,
// so that no key exceeds 50 characters (a 40-character id gives 48 and 50).
import { RESOURCES, type ResourceName } from "../origin/resources";
import { isValidProductId } from "../origin/types";

export const MAX_KEY_LENGTH = 50;

/** `pp:v1:p:p-000123`: the entry of one resource of one product. */
export function entryKey(prefix: string, resource: ResourceName, id: string): string {
  if (!isValidProductId(id)) throw new Error(`refusing to build a key from an invalid id`);
  return `${prefix}:${RESOURCES[resource].code}:${id}`;
}

/** `pp:v1:l:p:p-000123`: the cross-isolate fill lock of that entry. */
export function lockKey(prefix: string, entry: string): string {
  return `${prefix}:l:${entry.slice(prefix.length + 1)}`;
}

/** `pp:v1:x:p:p-000123`: when that entry was last purged; fills that began earlier may not write. */
export function purgeMarkerKey(prefix: string, entry: string): string {
  return `${prefix}:x:${entry.slice(prefix.length + 1)}`;
}

/**
 * The purge log: a sequence number, recent purges by sequence, the latest tag/all purge times (a hash), the era
 * of the sequence, and the recent purges' numbers with the tag/all ones whole (see invalidation/log.ts).
 */
export function purgeLogKeys(prefix: string): { seq: string; log: string; wide: string; era: string; wideLog: string } {
  return {
    seq: `${prefix}:purge:seq`,
    log: `${prefix}:purge:log`,
    wide: `${prefix}:purge:marks`,
    era: `${prefix}:purge:era`,
    wideLog: `${prefix}:purge:wide-log`,
  };
}
