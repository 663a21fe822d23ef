// The known-ids filter for integration tests: built in the stack's Redis with
// the project's own code, as an operator would after a deploy, and waited for
// in a worker.
import { buildKnownIdsFilter } from "../../dev/harness/stack";
import { GATEWAY_TOKEN, PURGE_TOKEN, type Stack } from "./stack";
import type { WorkerInstance } from "./worker";

/** Builds the filter of every id the stack's origin lists (room for 20,000 more). */
export async function buildFilter(stack: Stack): Promise<void> {
  await buildKnownIdsFilter({ originUrl: stack.origin.url, gatewayUrl: stack.gateway.url, token: GATEWAY_TOKEN, room: 20_000 });
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
