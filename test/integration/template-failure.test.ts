// A page template that fails at run time must not take every HTML route
// down (docs/architecture.md, "Saying what happened"): the bundle as
// deployed, in the Workers runtime, with the product page's and the error
// pages' render made to throw, as a template bug would. Product pages then
// answer the 500 page, and the error pages, which fail as well, fall back to
// a static page that no template can break; the cause is logged once, and
// routes that render nothing are not touched.
import { cpSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BUNDLE_DIR } from "../support/build";
import { page } from "../support/faults";
import { PURGE_TOKEN, startStack, type Stack } from "../support/stack";
import { startWorker, type WorkerInstance } from "../support/worker";

const BROKEN = "a broken template (planted by the test)";
/** The render functions made to throw, by their name in the bundle (src/render/index.ts). */
const BROKEN_RENDERS = ["renderProductPage", "renderErrorPage"];

let stack: Stack;
let worker: WorkerInstance;
let bundleDir: string;

/** A copy of the tests' bundle whose given render functions throw at their first line. */
function brokenBundle(): string {
  // Beside the tests' bundle: its source map's relative paths must not climb out of where workerd starts.
  const dir = `${BUNDLE_DIR}-broken-${process.pid}`;
  cpSync(BUNDLE_DIR, dir, { recursive: true });
  const script = join(dir, "index.js");
  let source = readFileSync(script, "utf8");
  for (const name of BROKEN_RENDERS) {
    const head = new RegExp(`function ${name}\\(([^)]*)\\) \\{`);
    // A bundle without the function would make this test pass for nothing.
    if (!head.test(source)) throw new Error(`${name} not found in the bundle: the test cannot plant its failure`);
    source = source.replace(head, (match) => `${match} throw new Error(${JSON.stringify(BROKEN)});`);
  }
  writeFileSync(script, source);
  return dir;
}

beforeAll(async () => {
  stack = await startStack();
  bundleDir = brokenBundle();
  worker = await startWorker(stack.bindings, { bundleDir });
});

afterAll(async () => {
  await worker?.close();
  await stack?.close();
  rmSync(bundleDir, { recursive: true, force: true });
});

describe("a template that fails at run time", () => {
  it("gives product pages the 500 page, from the static fallback, with no stack or cause in it", async () => {
    for (let i = 0; i < 3; i++) {
      const p = await page(worker, "/products/p-000042");
      expect(p.status).toBe(500);
      expect(p.headers.get("content-type")).toMatch(/^text\/html/);
      expect(p.headers.get("cache-control")).toBe("no-store");
      expect(p.html).toContain("Something went wrong on our side.");
      expect(p.html).toContain('<a href="/">');
      expect(p.html).not.toContain(BROKEN);
      expect(p.html).not.toMatch(/Error:|at .*\.js/);
    }
  });

  it("keeps each error page's own status when its template fails too: a 404 is still a 404", async () => {
    const p = await page(worker, "/products/not-an-id");
    expect([400, 404]).toContain(p.status);
    expect(p.html).toContain('<a href="/">');
    expect(p.html).not.toContain(BROKEN);
    const missing = await page(worker, "/no/such/page");
    expect(missing.status).toBe(404);
  });

  it("leaves routes that render no template alone", async () => {
    expect((await worker.fetch("/healthz")).status).toBe(200);
    const status = await worker.fetch("/__status.json", { headers: { authorization: `Bearer ${PURGE_TOKEN}` } });
    expect(status.status).toBe(200);
  });

  it("logs the failure once with its cause, however many pages hit it", async () => {
    for (let i = 0; i < 5; i++) await page(worker, "/products/p-000043");
    // The last lines reach the log a moment after the answers.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const failures = worker.logs.filter((line) => line.includes('"event":"render_failed"'));
    expect(failures).toHaveLength(1);
    expect(failures[0]).toContain(BROKEN);
  });
});
