// What the location tier's integration tests read of a worker: the tier
// each part of a page came from, and the tier's own counts on the status page.
import { expect } from "vitest";
import { member } from "../../dev/harness/cacheStatus";
import { PAGE_RESOURCES } from "../../src/origin/resources";
import { PURGE_TOKEN } from "./stack";
import type { WorkerInstance } from "./worker";

/**
 * Puts of a cold page's copy in the location (one copy holds the page's four
 * parts), with the known-ids filter off as in these tests: the product is
 * filled first, alone, and its landing puts a copy of it; the last of the
 * other three to land puts the copy with all four.
 */
export const COLD_PAGE_PUTS = 2;

/** The product page's Cache-Status member for each part (the page must be a 200). */
export async function pageParts(worker: WorkerInstance, id: string): Promise<Record<string, string>> {
  const response = await worker.fetch(`/products/${id}`);
  expect(response.status).toBe(200);
  const status = response.headers.get("cache-status") ?? "";
  return Object.fromEntries(PAGE_RESOURCES.map((part) => [part, member(status, part)]));
}

/** What `worker`'s location tier did so far (its status page's counts; zeros with the tier off). */
export async function locationStats(worker: WorkerInstance): Promise<{ puts: number; purged: number; unvouched: number }> {
  const status = (await (await worker.fetch("/__status.json", { headers: { authorization: `Bearer ${PURGE_TOKEN}` } })).json()) as {
    location: { stats: { puts: number; purged: number; unvouched: number } | null };
  };
  return status.location.stats ?? { puts: 0, purged: 0, unvouched: 0 };
}
