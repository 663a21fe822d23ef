// A consistent-hash ring with virtual nodes (L2 over several shards, docs/architecture.md#keys-and-values-in-redis): each shard owns many
// points on a 32-bit circle, in proportion to its weight, and a key belongs to the first point at or after its hash. Adding a shard takes
// only the keys that land on its new points; no key moves between two old shards.
import { hash32 } from "../../shared/hash";

export interface RingMember {
  /** Stable name: a shard's points come from it, so renaming a shard moves its keys. */
  name: string;
  /** Relative share of the keys (default 1). */
  weight?: number;
}

/** Points per unit of weight: enough for the most loaded of 3 shards to stay within ~1.10× the mean. */
const VIRTUAL_NODES_PER_WEIGHT = 256;

export interface Ring {
  /** Index, in the members' order, of the member that owns `key`. */
  ownerOf(key: string): number;
  readonly size: number;
}

export function createRing(members: readonly RingMember[]): Ring {
  if (members.length === 0) throw new Error("a ring needs at least one member");
  const points: { at: number; owner: number }[] = [];
  members.forEach((member, owner) => {
    const count = Math.max(1, Math.round(VIRTUAL_NODES_PER_WEIGHT * (member.weight ?? 1)));
    for (let i = 0; i < count; i++) points.push({ at: hash32(`${member.name}#${i}`), owner });
  });
  points.sort((a, b) => a.at - b.at || a.owner - b.owner);
  const positions = Uint32Array.from(points, (point) => point.at);
  const owners = Uint16Array.from(points, (point) => point.owner);

  return {
    size: members.length,
    ownerOf(key) {
      if (members.length === 1) return 0;
      const h = hash32(key);
      // First point at or after h; past the last point, the circle wraps to the first.
      let low = 0;
      let high = positions.length;
      while (low < high) {
        const mid = (low + high) >>> 1;
        if (positions[mid]! < h) low = mid + 1;
        else high = mid;
      }
      return owners[low === positions.length ? 0 : low]!;
    },
  };
}
