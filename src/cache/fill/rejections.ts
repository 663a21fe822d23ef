// Origin answers about one id that the tier could not use (a 400 or 422, a
// body that breaks the contract: origin/client.ts, isAnswerAboutId), by key,
// until they lapse. Such a key is not asked again meanwhile, by a fill or a
// refresh, so junk ids and an origin bug for one product cost one call per
// `rejectedAnswerTtl`, where each would otherwise be asked on every request.
// A reader with a copy at hand serves it; one without gets the "no data"
// entry (a 404 page for a product).
import { LRUCache } from "lru-cache";
import type { Config } from "../../config";
import { DEFAULTS } from "../../config/defaults";
import type { OriginFailure } from "../../origin/failure";
import type { ResourceName } from "../../origin/resources";
import type { Clock } from "../../shared/clock";
import { deadlinesFor, type Entry } from "../entry";

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
  const rejections = new LRUCache<string, Rejection>({ max: DEFAULTS.rejectedAnswersMax });
  return {
    of(key) {
      const rejection = rejections.get(key);
      if (rejection && rejection.noData.freshUntil > clock.now()) return rejection;
      if (rejection) rejections.delete(key);
      return undefined;
    },
    remember(key, resource, failure) {
      const policy = config.policies[resource];
      const ttl = Math.min(policy.negativeTtl, DEFAULTS.rejectedAnswerTtl);
      const deadlines = deadlinesFor(false, { ...policy, negativeTtl: ttl }, clock.now(), random);
      const rejection = { failure, noData: { data: null, version: 0, ...deadlines } };
      rejections.set(key, rejection);
      return rejection;
    },
    forget: (key) => void rejections.delete(key),
    forgetAll: () => rejections.clear(),
  };
}
