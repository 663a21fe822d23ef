// A streamed product page (src/http/streamedPage.ts): its pieces go out in
// document order, each once the parts it shows are final, and the document
// closes whatever becomes of a later part: its answer, its failure, or its
// bound running out (fake timers: order and outcome, no wall clock).
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { failed, served, type Served } from "../../src/cache/served";
import { streamedBody, type StreamEnd } from "../../src/http/streamedPage";
import type { PageResource } from "../../src/origin/resources";
import { PRODUCT_PAGE_PIECES, renderProductPage } from "../../src/render";
import type { ProductPageModel, Section } from "../../src/render/model";
import { samplePageModel } from "../support/fakes";
import type { Entry } from "../../src/cache/entry";

const BOUND_MS = 2000;

/** What a part's answer gives its section, as the product page does (found: its data; failed: its default). */
const section = (_resource: PageResource, answer: Served<unknown>): Section<unknown> =>
  answer.outcome === "found" ? { state: "ok", data: answer.data } : { state: "unavailable" };

function answer(resource: PageResource, data: unknown): Served<unknown> {
  const entry: Entry = { data, version: 1, fetchedAt: 0, freshUntil: 1, staleUntil: 2, errorUntil: 3 };
  return served(resource, entry, "origin", "fresh");
}

/** A later part's read, settled by the test. */
function deferred() {
  let settle!: (value: Served<unknown>) => void;
  let fail!: (error: Error) => void;
  const promise = new Promise<Served<unknown>>((resolve, reject) => {
    settle = resolve;
    fail = reject;
  });
  return { promise, settle, fail };
}

/** The full model, and the one a streamed page starts from: reviews and recommendations still to come. */
function models() {
  const sample = samplePageModel("p-000042");
  const item = { id: "p-000043", title: "Trail Runner 3", price: { amount: 9900, currency: "USD" }, image: "https://img.example/p-000043/1.jpg" };
  const whole: ProductPageModel = { ...sample, recommendations: { state: "ok", data: { id: "p-000042", items: [item], version: 1 } } };
  const start: ProductPageModel = { ...whole, reviews: { state: "unavailable" }, recommendations: { state: "unavailable" } };
  return { whole, start };
}

async function open(later: { reviews: Promise<Served<unknown>>; recommendations: Promise<Served<unknown>> }) {
  const { start } = models();
  const ends: StreamEnd[] = [];
  const leave = vi.fn();
  const visitor = new AbortController();
  const body = await streamedBody({
    pieces: PRODUCT_PAGE_PIECES,
    model: start,
    served: [],
    later,
    section,
    boundMs: () => BOUND_MS,
    visitor: visitor.signal,
    leave,
    ended: (end) => ends.push(end),
  });
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const chunks: string[] = [];
  /** Reads one chunk as it comes (undefined at the end). */
  const next = async () => {
    const { value, done } = await reader.read();
    if (done) return undefined;
    chunks.push(decoder.decode(value));
    return chunks.at(-1);
  };
  return { next, chunks, ends, leave, reader, visitor };
}

beforeEach(() => vi.useFakeTimers());
afterEach(() => vi.useRealTimers());

describe("a streamed product page", () => {
  it("is, joined, the whole page's HTML for the same data", () => {
    const { whole } = models();
    expect(PRODUCT_PAGE_PIECES.map((piece) => piece.render(whole)).join("")).toBe(renderProductPage(whole));
  });

  it("sends the title and price first, then each section in document order as it arrives", async () => {
    const { whole } = models();
    const reviews = deferred();
    const recommendations = deferred();
    const page = await open({ reviews: reviews.promise, recommendations: recommendations.promise });

    const first = await page.next();
    expect(first).toContain("<h1>");
    expect(first).toContain('class="price');
    expect(first).not.toContain('class="reviews"');

    // Recommendations come first, but the reviews are before them in the document: nothing more is sent yet.
    recommendations.settle(answer("recommendations", (whole.recommendations as { data: unknown }).data));
    let sent = false;
    const second = page.next().then((chunk) => ((sent = true), chunk));
    await vi.advanceTimersByTimeAsync(0);
    expect(sent).toBe(false);

    reviews.settle(answer("reviews", (whole.reviews as { data: unknown }).data));
    expect(await second).toContain('class="reviews"');
    expect(await page.next()).toContain('class="recommendations"');
    expect(await page.next()).toMatch(/application\/ld\+json.*<\/html>$/s);
    expect(await page.next()).toBeUndefined();
    expect(page.chunks.join("")).toBe(renderProductPage(whole));
    expect(page.ends).toEqual([{ served: expect.any(Array), late: [], left: false }]);
    expect(page.ends[0]!.served.map((part) => part.resource)).toEqual(["reviews", "recommendations"]);
  });

  it("closes a section with its default when its read fails or throws after the first byte", async () => {
    const page = await open({
      reviews: Promise.resolve(failed("reviews", { forward: "miss", failure: "status" })),
      recommendations: Promise.reject(new Error("a bug in a fill")),
    });
    const html = [await page.next(), await page.next(), await page.next(), await page.next()].join("");
    expect(html).toContain("Reviews are unavailable right now.");
    expect(html).not.toContain('class="recommendations"');
    expect(html.endsWith("</main></body></html>")).toBe(true);
    expect(await page.next()).toBeUndefined();
    expect(page.ends[0]!.served.map((part) => part.outcome)).toEqual(["failed", "failed"]);
    expect(page.ends[0]!.late).toEqual([]);
  });

  it("gives a section its default once its bound has passed, and says it was late", async () => {
    const { whole } = models();
    const reviews = deferred();
    const page = await open({
      reviews: reviews.promise,
      recommendations: Promise.resolve(answer("recommendations", (whole.recommendations as { data: unknown }).data)),
    });
    await page.next();
    const second = page.next();
    await vi.advanceTimersByTimeAsync(BOUND_MS - 1);
    expect(page.chunks).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(await second).toContain("Reviews are unavailable right now.");
    // An answer after the bound changes nothing already sent.
    reviews.settle(answer("reviews", (whole.reviews as { data: unknown }).data));
    expect(await page.next()).toContain('class="recommendations"');
    await page.next();
    expect(await page.next()).toBeUndefined();
    expect(page.ends[0]!.late).toEqual(["reviews"]);
  });

  it("stops the page's remaining work when its visitor leaves mid-stream, seen as the body cancelled or the request's signal", async () => {
    for (const leaves of ["cancel", "abort"] as const) {
      const page = await open({ reviews: deferred().promise, recommendations: deferred().promise });
      await page.next();
      if (leaves === "cancel") await page.reader.cancel();
      else page.visitor.abort();
      expect(page.leave).toHaveBeenCalledTimes(1);
      expect(page.ends).toEqual([{ served: [], late: [], left: true }]);
      // Both seen: counted once.
      page.visitor.abort();
      expect(page.ends).toHaveLength(1);
    }
  });
});
