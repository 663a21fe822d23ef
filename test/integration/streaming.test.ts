// Streamed pages (docs/architecture.md, "Streamed pages"): a cold page whose
// core (the product, its stock) is read while its reviews and
// recommendations are still at the origin goes out at once, the rest as it
// arrives, in the real Workers runtime over real HTTP, gzip asked for as a
// browser does. The demo origin answers in ~20 ms; the non-core services are
// made late. Order and outcome are checked, not wall-clock bounds: what the
// first chunk holds, what the end holds.
import { execFile } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { createGunzip } from "node:zlib";
import vnu from "vnu-jar";
import { parseList } from "structured-headers";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { indexOf, reviewsFor } from "../../dev/origin/catalog";
import { pollUntil, startHttpWorker, tierStatus } from "../support/clients";
import { clearFaults, completeProducts, escapeHtml, injectFault } from "../support/faults";
import { startStack, type Stack } from "../support/stack";
import type { WorkerInstance } from "../support/worker";

/** Late enough that the core is read long before: the page is streamed. */
const LATE_MS = 700;

let stack: Stack;
let worker: WorkerInstance;
/** Products with reviews and recommendations, each test its own (a cold page). */
const ids = completeProducts(7000, 8);

beforeAll(async () => {
  stack = await startStack({ latencyMs: 20, jitterMs: 2 });
  worker = await startHttpWorker(stack.bindings);
});
afterAll(async () => {
  await worker?.close();
  await stack?.close();
});
afterEach(() => clearFaults(stack));

interface Streamed {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** The body's text in the pieces it arrived in, decompressed. */
  chunks: string[];
  /** Resolves with the first piece of text. */
  first: Promise<string>;
  /** Resolves with the whole text once the body ends. */
  whole: Promise<string>;
  /** Closes the connection (the visitor leaves). */
  close(): void;
}

/** A GET on its own connection asking for gzip as a browser does; the body's text is recorded as it arrives. */
function get(path: string, headers: Record<string, string> = {}): Promise<Streamed> {
  return getFrom(worker, path, headers);
}

function getFrom(from: WorkerInstance, path: string, headers: Record<string, string> = {}): Promise<Streamed> {
  return new Promise((resolve, reject) => {
    const req = request(from.url + path, { agent: false, headers: { "accept-encoding": "gzip", ...headers } }, (res) => {
      const chunks: string[] = [];
      const text = res.headers["content-encoding"] === "gzip" && res.statusCode !== 304 ? res.pipe(createGunzip()) : res;
      let firstChunk: (chunk: string) => void = () => undefined;
      const first = new Promise<string>((done) => (firstChunk = done));
      const whole = new Promise<string>((done, fail) => {
        text.on("data", (chunk: Buffer) => {
          chunks.push(chunk.toString("utf8"));
          if (chunks.length === 1) firstChunk(chunks[0]!);
        });
        text.on("end", () => done(chunks.join("")));
        text.on("error", fail);
      });
      resolve({ status: res.statusCode ?? 0, headers: res.headers, chunks, first, whole, close: () => req.destroy() });
    });
    req.on("error", reject);
    req.end();
  });
}

function details(cacheStatus: unknown): string[] {
  return parseList(String(cacheStatus ?? "")).map(([, params]) => String(params.get("detail")));
}

describe("a cold page whose reviews and recommendations are late", () => {
  it("is streamed: the title and price first, then the reviews once they come, not their default", async () => {
    // The late services hold their answers until the faults change: the first chunk can only have come before them.
    await injectFault(stack, { service: "reviews", down: "hang" });
    await injectFault(stack, { service: "recommendations", down: "hang" });
    const id = ids[0]!;
    const answer = await get(`/products/${id}`);
    expect(answer.status).toBe(200);
    const first = await answer.first;
    expect(first).toContain("<h1>");
    expect(first).toContain('class="price');
    expect(first).not.toContain('class="reviews"');
    // Its turn in admission lasts until its last part is final: its later parts' replies are cold work too.
    expect((await tierStatus(worker)).overload?.admission.coldPages).toBe(1);
    await clearFaults(stack);
    const html = await answer.whole;
    expect((await tierStatus(worker)).overload?.admission.coldPages).toBe(0);
    const review = reviewsFor(indexOf(id)!)!.top[0]!;
    expect(html).toContain('class="reviews"');
    expect(html).not.toContain("Reviews are unavailable right now.");
    expect(html).toContain(escapeHtml(review.author));
    expect(html).toContain('class="recommendations"');
    expect(html.endsWith("</html>")).toBe(true);
    // What was known before the body: the core's answers, the rest named as streamed. No ETag, and nothing kept downstream.
    expect(details(answer.headers["cache-status"])).toEqual(["product", "inventory", "reviews streamed", "recommendations streamed"]);
    expect(answer.headers.etag).toBeUndefined();
    expect(answer.headers["cache-control"]).toBe("no-cache");
    expect(answer.headers.link).toMatch(/^<.+>; rel=preload; as=image$/);
  });

  it("is whole when its parts come together: one compressed body with its ETag", async () => {
    // Every service answers in ~20 ms: the later parts come within as long again as the core took.
    const answer = await get(`/products/${ids[4]}`);
    expect(await answer.whole).toContain('class="reviews"');
    expect(details(answer.headers["cache-status"])).toEqual(["product", "inventory", "reviews", "recommendations"]);
    expect(answer.headers["content-encoding"]).toBe("gzip");
    expect(String(answer.headers.etag)).toMatch(/^W\/"[0-9a-f]{16}"$/);
  });

  it("is whole once its parts are at hand: one body with its ETag, and a 304 for it", async () => {
    await injectFault(stack, { service: "reviews", latencyMs: LATE_MS });
    const id = ids[1]!;
    const streamed = await get(`/products/${id}`);
    const streamedHtml = await streamed.whole;
    expect(details(streamed.headers["cache-status"])).toContain("reviews streamed");
    const whole = await get(`/products/${id}`);
    expect(await whole.whole).toBe(streamedHtml);
    expect(details(whole.headers["cache-status"])).toEqual(["product", "inventory", "reviews", "recommendations"]);
    const etag = String(whole.headers.etag);
    expect(etag).toMatch(/^W\/"[0-9a-f]{16}"$/);
    expect(whole.headers["cache-control"]).toMatch(/^public, max-age=\d+/);
    const again = await get(`/products/${id}`, { "if-none-match": etag });
    expect(again.status).toBe(304);
  });

  it("closes a section that fails after the first byte with its default, and the document whole", async () => {
    await injectFault(stack, { service: "reviews", latencyMs: LATE_MS / 2, errorRate: 1 });
    await injectFault(stack, { service: "recommendations", latencyMs: LATE_MS });
    const answer = await get(`/products/${ids[2]}`);
    expect(answer.status).toBe(200);
    expect(await answer.first).not.toContain('class="reviews"');
    const html = await answer.whole;
    expect(html).toContain("Reviews are unavailable right now.");
    expect(html).toContain('class="recommendations"');
    expect(html.endsWith("</main></body></html>")).toBe(true);
    expect(answer.headers["cache-control"]).toBe("no-cache");
  });

  it("stops the page's remaining work when its visitor leaves mid-stream", async () => {
    const departures = async () => (await tierStatus(worker)).overload!.departures;
    const before = await departures();
    // The reviews come first; the recommendations are still at the origin when the page notices its visitor gone.
    await injectFault(stack, { service: "reviews", latencyMs: LATE_MS / 2 });
    await injectFault(stack, { service: "recommendations", latencyMs: 3 * LATE_MS });
    const answer = await get(`/products/${ids[3]}`);
    await answer.first;
    answer.whole.catch(() => undefined);
    answer.close();
    const after = await pollUntil(
      "the page counted as left and its last fill as work nobody waits for",
      departures,
      (now) =>
        now.pagesLeft > before.pagesLeft &&
        now.fillsFinished + now.fillsDropped + now.fillsStopped > before.fillsFinished + before.fillsDropped + before.fillsStopped,
      10_000,
    );
    expect(after.pagesLeft).toBe(before.pagesLeft + 1);
  });

  it("passes the W3C checker whether its sections arrived, defaulted at their timeout, or failed after the first byte", async () => {
    // Reviews given 300 ms: a hung service defaults within the test's time.
    const quick = await startHttpWorker({ ...stack.bindings, CACHE_POLICIES: JSON.stringify({ reviews: { originTimeoutMs: 300 } }) });
    try {
      const pages: Record<string, string> = {};
      const streamedFrom = async (name: string, worker: WorkerInstance, path: string, release?: () => Promise<void>) => {
        const answer = await getFrom(worker, path);
        await answer.first;
        await release?.();
        pages[name] = await answer.whole;
        expect(details(answer.headers["cache-status"]), name).toContain("reviews streamed");
      };
      await injectFault(stack, { service: "reviews", down: "hang" });
      await streamedFrom("arrived", worker, `/products/${ids[5]}`, () => clearFaults(stack));
      await injectFault(stack, { service: "reviews", down: "hang" });
      await streamedFrom("defaulted", quick, `/products/${ids[6]}`);
      await clearFaults(stack);
      await injectFault(stack, { service: "reviews", latencyMs: LATE_MS / 2, errorRate: 1 });
      await streamedFrom("failed", worker, `/products/${ids[7]}`);
      expect(pages.arrived).not.toContain("Reviews are unavailable right now.");
      for (const name of ["defaulted", "failed"]) expect(pages[name], name).toContain("Reviews are unavailable right now.");

      const dir = mkdtempSync(join(tmpdir(), "w3c-"));
      const files = Object.entries(pages).map(([name, html]) => {
        const file = join(dir, `${name}.html`);
        writeFileSync(file, html);
        return file;
      });
      // The Nu Html Checker (validator.w3.org/nu), run locally: its JSON report goes to stderr; it exits 1 on an error.
      const { stderr } = await promisify(execFile)("java", ["-jar", vnu, "--format", "json", "--exit-zero-always", ...files], { maxBuffer: 16 << 20 });
      const messages = (JSON.parse(stderr) as { messages: { type: string; url: string; message: string }[] }).messages;
      expect(messages.filter((message) => message.type === "error")).toEqual([]);
    } finally {
      await quick.close();
    }
  });
});
