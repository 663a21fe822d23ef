// The fleet view end to end: two isolates (workerd) whose FLEET binding
// delivers to the local recorder (dev/fleet/recorder.ts, Analytics Engine's
// SQL API on SQLite), a real redis-server behind the gateway, the demo
// origin. A page's data point says what its Cache-Status says; `npm run
// fleet`'s figures (dev/fleet/fleetTables.ts, the same query text that goes to
// Analytics Engine) are what the two status pages count together; every
// query the README's "Seeing the fleet" names runs here.
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fleetFigures, runQuery, type SqlEndpoint } from "../../dev/fleet/fleetTables";
import { printFigures } from "../../dev/fleet/print";
import { FLEET_QUERIES } from "../../dev/fleet/queries";
import { startRecorder, type Recorder } from "../../dev/fleet/recorder";
import { ANSWER_TIERS, BLOB, blob, DOUBLE, double, FLEET_DATASET, resourceBlob } from "../../src/observability/fleetPoints";
import type { StatusModel } from "../../src/observability/statusModel";
import { PAGE_RESOURCES, RESOURCE_NAMES } from "../../src/origin/resources";
import { clearFaults, completeProducts, injectFault, page, sleep, waitFor } from "../support/faults";
import { PURGE_TOKEN, startStack, type Stack } from "../support/stack";
import { startWorker, type WorkerInstance } from "../support/worker";

const AUTH = { authorization: `Bearer ${PURGE_TOKEN}` };
const RECORDER_TOKEN = "test-fleet-token";
const HOUR = { sinceSeconds: 3600 };

async function status(worker: WorkerInstance): Promise<StatusModel> {
  return (await (await worker.fetch("/__status.json", { headers: AUTH })).json()) as StatusModel;
}

/** Each member of a Cache-Status header as the fleet names it: the resource's tier, or "failed". */
function tiersOf(cacheStatus: string): Record<string, string> {
  const tiers: Record<string, string> = {};
  for (const member of cacheStatus.split(/,\s*(?=pp-)/)) {
    const detail = /detail="([a-z]+)([^"]*)"/.exec(member);
    const tier = /^pp-([a-z0-9]+)/.exec(member)?.[1];
    if (!detail || !tier) continue;
    tiers[detail[1]!] = detail[2]!.includes("failed") ? "failed" : tier;
  }
  return tiers;
}

describe("the fleet view", () => {
  let stack: Stack;
  let recorder: Recorder;
  let workers: WorkerInstance[];
  let endpoint: SqlEndpoint;

  beforeAll(async () => {
    stack = await startStack();
    recorder = await startRecorder({ port: 0, token: RECORDER_TOKEN });
    endpoint = { url: recorder.sqlUrl, token: RECORDER_TOKEN };
    // Every page written (no sampling), so that the figures can be held to the status pages' exact counts.
    const bindings = { ...stack.bindings, FLEET_PAGE_SAMPLE: "1" };
    workers = await Promise.all([0, 1].map(() => startWorker(bindings, { fleetPointsUrl: recorder.pointsUrl })));
  });
  afterAll(async () => {
    await Promise.all((workers ?? []).map((worker) => worker.close()));
    await recorder?.close();
    await stack?.close();
  });

  /** Waits until the recorder holds `atLeast` page points, the last one delivered 100 ms after its write. */
  async function delivered(atLeast: number): Promise<void> {
    await waitFor(
      `${atLeast} page points at the recorder (it holds ${recorder.points()} points of ${recorder.batches()} batches, ${recorder.dropped()} dropped)`,
      async () => {
        const rows = await runQuery(
          endpoint,
          { name: "count", question: "", sql: () => `SELECT count() AS n FROM ${FLEET_DATASET} WHERE index1 = 'page' FORMAT JSON` },
          HOUR,
          // Before the first point the dataset does not exist (Analytics Engine's answer too).
        ).catch(() => []);
        return Number(rows[0]?.n ?? 0) >= atLeast;
      },
    );
  }

  it("writes a page's data point as its Cache-Status says: the tier of each resource, the outcome, the status", async () => {
    const [id] = completeProducts(7100, 1);
    const answers = [await page(workers[0]!, `/products/${id}`), await page(workers[0]!, `/products/${id}`)];
    expect(answers.map((answer) => answer.status)).toEqual([200, 200]);
    await delivered(2);
    const rows = await runQuery(
      endpoint,
      {
        name: "one product",
        question: "",
        sql: () =>
          `SELECT ${blob(BLOB.outcome)} AS outcome, ${double(DOUBLE.status)} AS status, ${double(DOUBLE.weight)} AS weight, ` +
          `${RESOURCE_NAMES.map((resource) => `${blob(resourceBlob(resource))} AS ${resource}`).join(", ")}, ` +
          `${ANSWER_TIERS.map((tier) => `${double(DOUBLE[tier])} AS ${tier}`).join(", ")} ` +
          `FROM ${FLEET_DATASET} WHERE index1 = 'page' AND ${blob(BLOB.detail)} = '${id}' ORDER BY timestamp FORMAT JSON`,
      },
      HOUR,
    );
    expect(rows).toHaveLength(2);
    for (const [i, answer] of answers.entries()) {
      const said = tiersOf(answer.cacheStatus);
      expect(Object.keys(said).sort()).toEqual([...PAGE_RESOURCES].sort());
      const row = rows[i]!;
      expect({ outcome: row.outcome, status: Number(row.status), weight: Number(row.weight) }).toEqual({ outcome: "ok", status: 200, weight: 1 });
      for (const resource of PAGE_RESOURCES) expect(row[resource], `${resource} in ${answer.cacheStatus}`).toBe(said[resource]);
      // The home page's resource is not on a product page: its column stays empty.
      expect(row.listing).toBe("");
      for (const tier of ANSWER_TIERS) expect(Number(row[tier]), tier).toBe(Object.values(said).filter((t) => t === tier).length);
    }
    // The first view filled every part from the origin, the second found them in L1.
    expect(Object.values(tiersOf(answers[0]!.cacheStatus))).toEqual(PAGE_RESOURCES.map(() => "origin"));
    expect(Object.values(tiersOf(answers[1]!.cacheStatus))).toEqual(PAGE_RESOURCES.map(() => "l1"));
  });

  it("gives, for both isolates together, what their two status pages count: pages, outcomes, tiers per resource, origin calls, breakers", async () => {
    const ids = completeProducts(7200, 40);
    // Cold and warm pages on both isolates, the home page, ids nobody sells.
    // (The other isolate's views come after all first views: a fill's write to L2 may be held up to a second, to go with others.)
    for (const [i, id] of ids.slice(0, 20).entries()) {
      expect((await page(workers[i % 2]!, `/products/${id}`)).status).toBe(200);
      expect((await page(workers[i % 2]!, `/products/${id}`)).status).toBe(200);
    }
    for (const [i, id] of ids.slice(0, 20).entries()) expect((await page(workers[(i + 1) % 2]!, `/products/${id}`)).status).toBe(200);
    for (const worker of workers) expect((await page(worker, "/")).status).toBe(200);
    for (const n of [1, 2, 3]) expect((await page(workers[n % 2]!, `/products/p-${String(9_900_000 + n)}`)).status).toBe(404);
    // A failing service: its sections defaulted, its breaker opened in the isolate that kept asking.
    await injectFault(stack, { service: "reviews", down: "500" });
    for (const id of ids.slice(20)) expect((await page(workers[0]!, `/products/${id}`)).status).toBe(200);
    await clearFaults(stack);
    // A purge recorded by one isolate reaches the other through the log.
    const purged = await workers[0]!.fetch("/__purge", {
      method: "POST",
      headers: { ...AUTH, "content-type": "application/json" },
      body: JSON.stringify({ ids: [ids[0]] }),
    });
    expect(purged.status).toBe(202);
    await sleep(1200);
    for (const worker of workers) expect((await page(worker, `/products/${ids[0]}`)).status).toBe(200);

    const statuses = await Promise.all(workers.map(status));
    await delivered(statuses.reduce((sum, s) => sum + s.last15m.pages, 0));
    // Points written outside a page (origin calls, breakers) go with a later delivery: one more page each, counted on both sides.
    await sleep(2500);
    for (const worker of workers) expect((await page(worker, `/products/${ids[1]}`)).status).toBe(200);
    const [a, b] = await Promise.all(workers.map(status));
    await delivered(a!.last15m.pages + b!.last15m.pages);
    const figures = await fleetFigures(endpoint, HOUR);
    // The first test's two views are the recorder's too, and worker 0's status page counts them.
    const together = (pick: (s: StatusModel) => number) => pick(a!) + pick(b!);
    expect(figures.totals.pages).toBe(together((s) => s.last15m.pages));
    expect(figures.totals.ok).toBe(together((s) => s.last15m.outcomes.ok));
    expect(figures.totals.notFound).toBe(together((s) => s.last15m.outcomes.absent + s.last15m.outcomes.filtered));
    expect(figures.totals.unavailable).toBe(together((s) => s.last15m.outcomes.unavailable));
    for (const resource of RESOURCE_NAMES) {
      for (const tier of ANSWER_TIERS) {
        expect(figures.resources[resource][tier], `${resource} ${tier}`).toBe(together((s) => s.last15m.resources[resource][tier]));
      }
    }
    expect(figures.totals.stale).toBe(together((s) => s.last15m.total.stale));
    expect(figures.totals.staleIfError).toBe(together((s) => s.last15m.total.staleIfError));
    expect(figures.totals.defaultedSections).toBe(together((s) => s.last15m.total.defaulted));
    expect(figures.totals.defaultedSections).toBeGreaterThan(0);
    expect(figures.totals.originFetches).toBe(together((s) => s.last15m.originTotal.fetches));
    expect(figures.totals.originErrors).toBe(together((s) => s.last15m.originTotal.errors));
    expect(figures.totals.originErrors).toBeGreaterThan(0);
    expect(figures.totals.originShed).toBe(together((s) => s.last15m.originTotal.shed));
    const transitions = (s: StatusModel) => Object.values(s.breakerTransitions).reduce((sum, n) => sum + n, 0);
    expect(figures.breakers.reduce((sum, row) => sum + Number(row.changes), 0)).toBe(together(transitions));
    expect(figures.breakers.some((row) => row.breaker === "origin:reviews" && row.state === "open")).toBe(true);
    // Both isolates, by the names their status pages show.
    expect(figures.isolates.map((row) => row.isolate).sort()).toEqual([a!.isolate.id, b!.isolate.id].sort());
    expect(figures.totals.purges.arrivals).toBeGreaterThanOrEqual(1);
    expect(figures.totals.purges.p99Ms).toBeLessThan(5000);

    const printed = printFigures(figures);
    expect(printed).toContain("origin:reviews");
    // An isolate's id is hex: one of digits only (one isolate in ~40) is still its name, printed as is, not as a count.
    expect(printFigures({ ...figures, isolates: [{ ...figures.isolates[0]!, isolate: "72662290" }] })).toMatch(/^72662290\s/m);
    expect(printed).toMatch(/hit ratio .*\d+\.\d%/);
  });

  it('runs every query the README\'s "Seeing the fleet" names, and the README names every query npm run fleet runs', async () => {
    const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8");
    const section = readme.slice(readme.indexOf("### Seeing the fleet"), readme.indexOf("\n### ", readme.indexOf("### Seeing the fleet") + 1));
    const named = [...section.matchAll(/^\| `([a-z-]+)` \|/gm)].map((m) => m[1]!);
    expect(named.sort()).toEqual(FLEET_QUERIES.map((query) => query.name).sort());
    for (const query of FLEET_QUERIES) {
      const rows = await runQuery(endpoint, query, HOUR);
      expect(rows.length, query.name).toBeGreaterThan(0);
    }
  });
});
