// CACHING=off: every read goes straight to the origin, and nothing is kept
// or shared — no L1, no location tier, no L2, no coalescing, no rendered
// page kept. Not a way to run a shop: the tier's own baseline (what the same
// worker, origin client and render do with no cache at all, which
// bench:peers sets the tier against), and the render-only upstream behind
// Nginx and Varnish in that benchmark. The origin client's own bounds still
// hold (its slots, time-outs and breakers): they protect the isolate.
import type { Config } from "../config";
import { failureOf } from "../origin/failure";
import type { OriginClient } from "../origin/client";
import type { ResourceName } from "../origin/resources";
import type { Clock } from "../shared/clock";
import { answerEntry } from "./entry";
import type { PageData, Timings } from "./pageRequest";
import type { ReadThrough } from "./readThrough";
import { failed, served, type Served } from "./served";

/** `cache` with its reads sent to the origin every time: what else it holds (its empty L1, its stats) stays as it is. */
export function bypassingCaches(
  cache: ReadThrough,
  { config, origin, clock }: { config: Pick<Config, "policies">; origin: OriginClient; clock: Clock },
): ReadThrough {
  async function fetchOne(resource: ResourceName, id: string): Promise<Served<unknown>> {
    const requestedAt = clock.now();
    try {
      const answer = await origin.fetchResource(resource, id);
      // No jitter: nothing is kept, the deadlines only say what the page's headers say.
      const entry = answerEntry(answer, config.policies[resource], requestedAt, () => 0);
      return served(resource, entry, "origin", "fresh", { forward: "bypass" });
    } catch (error) {
      return failed(resource, { forward: "bypass", failure: failureOf(error) });
    }
  }

  return Object.assign(Object.create(cache) as ReadThrough, {
    // Every part at once, as a server without a cache would ask for them.
    async read(id: string, resources: readonly ResourceName[]): Promise<{ data: PageData; timings: Timings }> {
      const startedAt = clock.now();
      const answers = await Promise.all(resources.map((resource) => fetchOne(resource, id)));
      return { data: Object.fromEntries(answers.map((answer) => [answer.resource, answer])) as PageData, timings: { origin: clock.now() - startedAt } };
    },
    // Lists show what the caches hold: nothing.
    readCached: async () => new Map(),
  });
}
