// Origin answers about one id that the tier could not use (origin/failure.ts, isAnswerAboutId), by key, until they lapse: a reader with a
// copy at hand serves it; one without gets the "no data" entry (a 404 page for a product).
import { LRUCache } from "lru-cache";
import type { Config } from "../../config";
import type { OriginFailure } from "../../origin/failure";
import type { ResourceName } from "../../origin/resources";
import type { Clock } from "../../shared/clock";
import { deadlinesFor, type Entry } from "../entry";

/**
 * Seconds (at most the resource's negativeTtl) an origin answer about one id that the tier cannot use (a 400 or 422, a body that breaks the
 * contract or names another id) is remembered: that id is not asked again meanwhile, so repeated junk ids cost one origin call each, and an
 * origin fixed by a deploy is heard within seconds. Kept in L1 only: it must never replace a good copy in L2 for the whole fleet.
 */
export const REJECTED_ANSWER_TTL = 10;
/**
 * Ids whose rejected answer is kept apart from L1, for ids with a copy still to serve (cache/readThrough.ts): a few hundred bytes each.
 * Rare (an origin bug for some products): a flood of junk ids only evicts the oldest, whose "no data" answers live in L1 anyway.
 */
const REJECTED_ANSWERS_MAX = 1000;

/** An origin answer about one id that the tier could not use, and the "no data" entry that stands for it until it lapses. */
interface Rejection {
  failure: OriginFailure;
  noData: Entry;
}

export interface Rejections {
  of(key: string): Rejection | undefined;
  remember(key: string, resource: ResourceName, failure: OriginFailure): Rejection;
  forget(key: string): void;
  forgetAll(): void;
}

export function createRejections({ config, clock, random }: { config: Pick<Config, "policies">; clock: Clock; random: () => number }): Rejections {
  const rejections = new LRUCache<string, Rejection>({ max: REJECTED_ANSWERS_MAX });
  return {
    of(key) {
      const rejection = rejections.get(key);
      if (rejection && rejection.noData.freshUntil > clock.now()) return rejection;
      if (rejection) rejections.delete(key);
      return undefined;
    },
    remember(key, resource, failure) {
      const policy = config.policies[resource];
      const ttl = Math.min(policy.negativeTtl, REJECTED_ANSWER_TTL);
      const deadlines = deadlinesFor(false, { ...policy, negativeTtl: ttl }, clock.now(), random);
      const rejection = { failure, noData: { data: null, version: 0, ...deadlines } };
      rejections.set(key, rejection);
      return rejection;
    },
    forget: (key) => void rejections.delete(key),
    forgetAll: () => rejections.clear(),
  };
}
