// The known-ids filter for integration tests: built in the stack's Redis with
// the project's own code, as an operator would after a deploy, and waited for
// in a worker.
import { createL2 } from "../../src/cache/l2/l2";
import { DEFAULT_POLICIES } from "../../src/config/defaults";
import { createKnownIds, listingOf } from "../../src/knownIds";
import { createOriginClient } from "../../src/origin/client";
import { createBreaker } from "../../src/shared/breaker";
import { systemClock } from "../../src/shared/clock";
import { GATEWAY_TOKEN, PURGE_TOKEN, type Stack } from "./stack";
import type { WorkerInstance } from "./worker";

/** Builds the filter of every id the stack's origin lists (capacity 20,000). */
export async function buildFilter(stack: Stack): Promise<void> {
  const l2 = createL2({
    url: stack.gateway.url,
    token: GATEWAY_TOKEN,
    timeoutMs: 5000,
    breaker: createBreaker({ failureThreshold: 3, coolDownMs: 1000, clock: systemClock }),
  });
  const knownIds = createKnownIds({ l2, keyPrefix: "pp:v1", clock: systemClock, capacity: 20_000, log: () => {} });
  await knownIds.rebuild(listingOf(createOriginClient({ baseUrl: stack.origin.url, policies: DEFAULT_POLICIES })));
}

/** The worker's filter state, from its authenticated status ("off" when disabled). */
export async function filterState(instance: WorkerInstance): Promise<string> {
  const status = await instance.fetch("/__status.json", { headers: { authorization: `Bearer ${PURGE_TOKEN}` } });
  const { knownIds } = (await status.json()) as { knownIds: { enabled: boolean; state?: string } };
  return knownIds.enabled ? (knownIds.state ?? "unknown") : "off";
}

/** Until the worker's filter is "ready", asking for `id` (the first look-up starts the load). */
export async function waitUntilReady(instance: WorkerInstance, id = "p-000001"): Promise<void> {
  await instance.fetch(`/products/${id}`);
  const deadline = Date.now() + 5000;
  while ((await filterState(instance)) !== "ready") {
    if (Date.now() > deadline) throw new Error(`filter not ready: ${await filterState(instance)}`);
    await instance.fetch(`/products/${id}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
