// `DEV_ISOLATES=2 npm run dev` and `npm run fleet -- --local`, as a shop
// engineer runs them: two isolates of the deployed bundle sharing Redis and
// the demo origin, their data points at the local recorder; the fleet's
// figures, as `npm run fleet` prints them (--json), are what the two isolates'
// status pages count together, and its tables name both isolates. Then
// Ctrl-C stops it as it stops one isolate under wrangler dev: every child in
// order, "stopped", exit code 0 (Miniflare's own SIGINT hook exited at once
// with 130).
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { FleetFigures } from "../../dev/fleet/fleetTables";
import { captureTail, waitForExit } from "../../dev/harness/children";
import { freePort } from "../../dev/harness/ports";
import type { StatusModel } from "../../src/observability/statusModel";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const UP_TIMEOUT_MS = 90_000;
/** npm run dev's own purge token (dev/run.ts). */
const DEV_TOKEN = "dev-purge-token";
/** dev/run.ts: isolate k listens on DEV_PORT + 100·k. */
const ISOLATE_PORT_STEP = 100;

let ports: Record<"DEV_PORT" | "ORIGIN_PORT" | "GATEWAY_PORT" | "DEV_REDIS_PORT" | "FLEET_PORT", number>;
let npm: ChildProcess;
let output: () => string;
const isolates = () => [ports.DEV_PORT, ports.DEV_PORT + ISOLATE_PORT_STEP].map((port) => `http://127.0.0.1:${port}`);

async function fleet(args: string[]): Promise<string> {
  const { stdout } = await promisify(execFile)(
    "npx",
    ["tsx", "dev/fleet/main.ts", "--local", `http://127.0.0.1:${ports.FLEET_PORT}`, "--since", "15m", ...args],
    {
      cwd: ROOT,
      maxBuffer: 8 * 1024 * 1024,
    },
  );
  return stdout;
}

beforeAll(async () => {
  ports = { DEV_PORT: 0, ORIGIN_PORT: 0, GATEWAY_PORT: 0, DEV_REDIS_PORT: 0, FLEET_PORT: 0 };
  const taken = new Set<number>();
  for (const name of Object.keys(ports) as (keyof typeof ports)[]) {
    let port = await freePort();
    // The second isolate's port (DEV_PORT + 100) must be free too: 65435 at most.
    while (taken.has(port) || (name === "DEV_PORT" && port > 65_435)) port = await freePort();
    taken.add(port);
    ports[name] = port;
  }
  npm = spawn("npm", ["run", "dev"], {
    cwd: ROOT,
    env: { ...process.env, ...Object.fromEntries(Object.entries(ports).map(([k, v]) => [k, String(v)])), DEV_ISOLATES: "2", WRANGLER_SEND_METRICS: "false" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  output = captureTail(npm, 8000);
  const deadline = Date.now() + UP_TIMEOUT_MS;
  while (!output().includes("The product-page tier is up")) {
    if (npm.exitCode !== null || Date.now() > deadline) throw new Error(`npm run dev did not come up:\n${output()}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}, UP_TIMEOUT_MS + 10_000);

afterAll(async () => {
  if (npm && npm.exitCode === null && npm.signalCode === null) {
    npm.kill("SIGTERM");
    if (!(await waitForExit(npm, 20_000))) npm.kill("SIGKILL");
  }
});

describe("DEV_ISOLATES=2 npm run dev, then npm run fleet -- --local", () => {
  it("prints the fleet's figures for both isolates together: what their two status pages count", async () => {
    const [first, second] = isolates();
    const get = async (url: string) => (await fetch(url)).status;
    for (let i = 0; i < 20; i++) {
      const id = `p-${String(100 + i).padStart(6, "0")}`;
      expect(await get(`${first}/products/${id}`)).toBe(200);
      expect(await get(`${second}/products/${id}`)).toBe(200);
      expect(await get(`${second}/products/${id}`)).toBe(200);
    }
    expect(await get(`${first}/`)).toBe(200);
    expect(await get(`${second}/products/p-999999`)).toBe(404);
    // The last pages' points go out with their flush, 100 ms after.
    await new Promise((resolve) => setTimeout(resolve, 1000));

    const statuses = await Promise.all(
      [first!, second!].map(
        async (url) => (await (await fetch(`${url}/__status.json`, { headers: { authorization: `Bearer ${DEV_TOKEN}` } })).json()) as StatusModel,
      ),
    );
    const figures = JSON.parse(await fleet(["--json"])) as FleetFigures;
    const together = (pick: (s: StatusModel) => number) => pick(statuses[0]!) + pick(statuses[1]!);
    expect(together((s) => s.last15m.pages)).toBe(62);
    expect(figures.totals.pages).toBe(together((s) => s.last15m.pages));
    expect(figures.totals.ok).toBe(together((s) => s.last15m.outcomes.ok));
    expect(figures.totals.notFound).toBe(together((s) => s.last15m.outcomes.absent + s.last15m.outcomes.filtered));
    for (const tier of ["l1", "location", "l2", "origin", "failed"] as const) {
      expect(figures.totals.tiers[tier], tier).toBe(together((s) => s.last15m.total[tier]));
    }
    // Origin calls are points of their own, some of them written after the last page (a refresh): within 5%.
    const originCalls = together((s) => s.last15m.originTotal.fetches);
    expect(Math.abs(figures.totals.originFetches - originCalls)).toBeLessThanOrEqual(Math.ceil(0.05 * originCalls));

    const printed = await fleet([]);
    for (const status of statuses) expect(printed).toContain(status.isolate.id);
    expect(printed).toMatch(/^pages\s+62$/m);
  }, 90_000); // two `npx tsx` runs of npm run fleet and 62 pages: ~27 s alone on 2 busy cores, past vitest's default 30 s beside another file

  it('stops on Ctrl-C as with one isolate: each isolate stopped, then the recorder and the stack, "stopped", exit code 0', async () => {
    // npm relays a SIGINT to dev/run.ts, as a terminal's Ctrl-C reaches them.
    npm.kill("SIGINT");
    expect(await waitForExit(npm, 30_000), `npm run dev did not exit:\n${output()}`).toBe(true);
    const lines = output().split("\n");
    expect({ code: npm.exitCode, signal: npm.signalCode }, output()).toEqual({ code: 0, signal: null });
    expect(lines, output()).toContain("[dev] stopped");
    expect(output()).not.toMatch(/^\s+at /m);
    for (const url of isolates()) await expect(fetch(`${url}/healthz`), `${url} still answers`).rejects.toThrow();
    await expect(fetch(`http://127.0.0.1:${ports.FLEET_PORT}/`), "the recorder still answers").rejects.toThrow();
  });
});
