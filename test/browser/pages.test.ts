// What visitors see (issue "What visitors see"): the pages in a real browser.
// Debian's chromium, driven by playwright-core, loads pages served over HTTP
// by the bundled worker in workerd, in front of the real stack (redis-server,
// the Upstash REST gateway, the demo origin and its SVG placeholder images).
//
// Each page must load with no console error, no script error, no failed
// request and no error response (other than the 404/503 document itself),
// and is screenshotted at desktop and phone widths under test/artifacts/browser/
// for a person to look at. Then: accessibility basics (one h1, lang, alt
// text, labelled price and availability, contrast of every visible text,
// keyboard focus reaching the links with a visible indicator), schema.org
// JSON-LD against what the page shows, page weight, lazy images and layout
// shift.
import { existsSync, mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { inventoryFor, productId, reviewsFor } from "../../dev/origin/catalog";
import { AVAILABILITY_UNKNOWN_TEXT } from "../../src/render/format";
import { clearFaults, completeProducts, injectFault, sleep } from "../support/faults";
import { freePort } from "../../dev/harness/ports";
import { startStack, type Stack } from "../support/stack";
import { startWorker, type WorkerInstance } from "../support/worker";

const CHROMIUM = "/usr/bin/chromium";
const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];
const hasChromium = existsSync(CHROMIUM);
if (!hasChromium) console.warn(`browser tests skipped: ${CHROMIUM} not found (apt-get install chromium)`);

const IN_PAGE_SCRIPT = resolve("test/browser/inpage.js");
const ARTIFACTS = resolve("test/artifacts/browser");

const VIEWPORTS = {
  desktop: { width: 1280, height: 800, isMobile: false },
  phone: { width: 390, height: 844, isMobile: true },
} as const;
type ViewportName = keyof typeof VIEWPORTS;

/** WCAG AA for normal text; applied to every text, large or not. */
const MIN_TEXT_CONTRAST = 4.5;
/** WCAG 1.4.11 for the focus indicator. */
const MIN_FOCUS_CONTRAST = 3;
const MAX_CLS = 0.1;
const MAX_PAGE_BYTES = 30 * 1024;
const MAX_INLINE_STYLE_BYTES = 8 * 1024;

/** Inventory fresh for 1 s, then usable only on error: "availability unknown" within a test. */
const SHORT_INVENTORY = JSON.stringify({ inventory: { ttl: 1, swr: 0, staleIfError: 60 } });
const PAST_SHORT_TTL_MS = 1300;

const SCHEMA_AVAILABILITY_TEXT: Record<string, RegExp> = {
  "https://schema.org/InStock": /^In stock$/,
  "https://schema.org/LimitedAvailability": /^Only \d+ left$/,
  "https://schema.org/OutOfStock": /^Out of stock$/,
};

// ---------------------------------------------------------------- what the in-page script reports

interface Structure {
  lang: string | null;
  title: string;
  h1: string[];
  jsonLd: string[];
  shownPrice: string | null;
  shownAvailability: string | null;
  availabilityClass: string | null;
  recommendationLinks: string[];
  horizontalOverflow: number;
  stylesheets: number;
  inlineStyleBytes: number;
  externalScripts: number;
}
interface ImageInfo {
  src: string;
  alt: string | null;
  loading: string | null;
  width: string | null;
  height: string | null;
  complete: boolean;
  naturalWidth: number;
  top: number;
  labelledByText: boolean;
  gallery: boolean;
}
interface ContrastRow {
  element: string;
  text: string;
  color: string;
  background: string;
  overImage: boolean;
  ratio: number;
}
interface FocusInfo {
  element: string;
  href: string | null;
  text: string;
  inRecommendations: boolean;
  focusVisible: boolean;
  outlineWidth: number;
  outlineContrast: number;
  boxShadow: string;
  onScreen: boolean;
}

const inPage = <T>(page: Page, call: string): Promise<T> => page.evaluate(`window.__pp.${call}`) as Promise<T>;

// ---------------------------------------------------------------- the stack, the worker, the browser

let stack: Stack;
let worker: WorkerInstance;
let base: string;
let browser: Browser;

// Ids of their own for each page, so that no cached entry decides a result.
const [TYPICAL, DEFAULTED, UNKNOWN_STOCK, UNAVAILABLE, LONG_TITLE, STREAMED] = completeProducts(4000, 6);
const NOT_FOUND = "p-999999"; // past the 10,000-product catalog

/** First catalog product from `from` with this stock status (and reviews, to see them with it). */
function productWithStock(from: number, status: "in_stock" | "low_stock" | "out_of_stock"): string {
  for (let index = from; index < from + 1000; index++) {
    if (inventoryFor(index).status === status && reviewsFor(index) !== null) return productId(index);
  }
  throw new Error(`no ${status} product from ${from}`);
}

interface Visit {
  page: Page;
  context: BrowserContext;
  status: number;
  headers: Record<string, string>;
  problems: string[];
  structure: Structure;
  images: ImageInfo[];
  cls: number;
  shifts: unknown[];
  screenshot: string;
}

/**
 * Opens `path` in a fresh context at one viewport, scrolls down so that lazy
 * images load, waits for the network to settle and collects what went wrong.
 * The caller closes `context`.
 */
async function visit(name: string, path: string, viewport: ViewportName, expectedStatus = 200, options: { screenshot?: boolean } = {}): Promise<Visit> {
  const { width, height, isMobile } = VIEWPORTS[viewport];
  const context = await browser.newContext({ viewport: { width, height }, isMobile, hasTouch: isMobile, deviceScaleFactor: 1 });
  await context.addInitScript({ path: IN_PAGE_SCRIPT });
  const page = await context.newPage();
  const url = base + path;
  const problems: string[] = [];
  const isDocument = (u: string) => u === url;
  page.on("console", (message) => {
    if (message.type() !== "error") return;
    // Chromium logs the error status of the document itself; that status is the point of a 404/503 page.
    if (expectedStatus >= 400 && isDocument(message.location().url) && /Failed to load resource/.test(message.text())) return;
    problems.push(`console error: ${message.text()} (${message.location().url})`);
  });
  page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
  page.on("requestfailed", (request) => problems.push(`request failed: ${request.url()} (${request.failure()?.errorText})`));
  page.on("response", (response) => {
    if (response.status() < 400) return;
    if (expectedStatus >= 400 && response.request().isNavigationRequest() && isDocument(response.url())) return;
    problems.push(`HTTP ${response.status()}: ${response.url()}`);
  });

  const response = await page.goto(url, { waitUntil: "load" });
  if (!response) throw new Error(`no response for ${url}`);
  // Bring every lazy image in, as a visitor scrolling down would, then back to the top.
  await page.evaluate("window.scrollTo(0, document.documentElement.scrollHeight)");
  await page.waitForLoadState("networkidle");
  await page.waitForFunction("[...document.images].every((img) => img.complete)", undefined, { timeout: 5000 });
  await page.evaluate("window.scrollTo(0, 0)");

  const screenshot = join(ARTIFACTS, `${name}-${viewport}-${width}x${height}.png`);
  if (options.screenshot !== false) {
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: screenshot, fullPage: true });
  }

  const { cls, shifts } = await inPage<{ cls: number; shifts: unknown[] }>(page, "cls()");
  return {
    page,
    context,
    status: response.status(),
    headers: response.headers(),
    problems,
    structure: await inPage<Structure>(page, "structure()"),
    images: await inPage<ImageInfo[]>(page, "images()"),
    cls,
    shifts,
    screenshot,
  };
}

/** What every page must get right, at every width. */
async function expectSoundPage(v: Visit, expectedStatus: number): Promise<void> {
  expect(v.status).toBe(expectedStatus);
  // A strict CSP, and nothing on the page violates it (a violation is a console error, counted as a problem).
  expect(v.headers["content-security-policy"]).toMatch(/default-src 'none'/);
  expect(v.problems, "console errors, script errors, failed or error requests").toEqual([]);

  const s = v.structure;
  expect(s.lang, "html[lang]").toMatch(/^[a-z]{2,3}(-[A-Za-z0-9]+)*$/);
  expect(s.title.trim()).not.toBe("");
  expect(s.h1, "exactly one h1").toHaveLength(1);
  expect(s.h1[0]).not.toBe("");
  expect(s.horizontalOverflow, "no sideways scrolling").toBeLessThanOrEqual(0);
  expect(s.stylesheets, "styles inline or one stylesheet").toBeLessThanOrEqual(1);
  expect(s.inlineStyleBytes).toBeLessThan(MAX_INLINE_STYLE_BYTES);
  expect(s.externalScripts).toBe(0);

  for (const img of v.images) {
    expect(img.alt, `alt attribute of ${img.src}`).not.toBeNull();
    // Empty alt only for an image whose link or figure already says it in text.
    if (img.alt === "") expect(img.labelledByText, `empty alt of ${img.src} is not decorative`).toBe(true);
    if (img.gallery) expect(img.alt, `product photo ${img.src} needs a description`).not.toBe("");
    expect(img.width && img.height, `width/height of ${img.src} (no layout shift)`).toBeTruthy();
    expect(img.naturalWidth, `${img.src} loaded`).toBeGreaterThan(0);
  }

  const rows = await inPage<ContrastRow[]>(v.page, "contrast()");
  expect(rows.length, "some text was measured").toBeGreaterThan(0);
  expect(
    rows.filter((row) => row.overImage),
    "text over a background image cannot be measured",
  ).toEqual([]);
  expect(
    rows.filter((row) => row.ratio < MIN_TEXT_CONTRAST),
    `contrast below ${MIN_TEXT_CONTRAST}:1`,
  ).toEqual([]);

  expect(Number.isNaN(v.cls), "layout-shift entries observed").toBe(false);
  expect(v.cls, `CLS (shifts: ${JSON.stringify(v.shifts)})`).toBeLessThan(MAX_CLS);
}

/** Presses Tab until focus leaves the page or comes round again; what was focused, in order. */
async function tabThrough(page: Page, max = 60): Promise<FocusInfo[]> {
  const seen: FocusInfo[] = [];
  for (let i = 0; i < max; i++) {
    await page.keyboard.press("Tab");
    const info = await inPage<FocusInfo | null>(page, "focused()");
    if (!info) break;
    if (seen.length > 0 && info.href === seen[0]!.href && info.text === seen[0]!.text) break;
    seen.push(info);
  }
  return seen;
}

function expectVisibleFocus(stops: FocusInfo[]): void {
  for (const stop of stops) {
    const where = `${stop.element} "${stop.text}"`;
    expect(stop.focusVisible, `${where} matches :focus-visible`).toBe(true);
    expect(stop.onScreen, `${where} is on screen when focused`).toBe(true);
    const indicator = stop.outlineContrast >= MIN_FOCUS_CONTRAST || (stop.boxShadow !== "none" && stop.boxShadow !== "");
    expect(indicator, `${where} has a visible focus indicator (outline ${stop.outlineWidth}px, ${stop.outlineContrast}:1)`).toBe(true);
  }
}

function parseJsonLd(structure: Structure): Record<string, any> {
  expect(structure.jsonLd, "one JSON-LD script").toHaveLength(1);
  const data = JSON.parse(structure.jsonLd[0]!) as Record<string, any>;
  expect(data["@context"]).toBe("https://schema.org");
  expect(data["@type"]).toBe("Product");
  return data;
}

// ---------------------------------------------------------------- the tests

describe.skipIf(!hasChromium)("what visitors see, in a real browser", () => {
  beforeAll(async () => {
    stack = await startStack();
    let lastError: unknown;
    // The free port may be taken before workerd binds it: try another.
    for (let attempt = 0; attempt < 3 && !worker; attempt++) {
      try {
        const port = await freePort();
        worker = await startWorker({ ...stack.bindings, CACHE_POLICIES: SHORT_INVENTORY }, { port });
      } catch (err) {
        lastError = err;
      }
    }
    if (!worker) throw lastError;
    base = worker.url!;
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, headless: true });
  });

  afterAll(async () => {
    await browser?.close();
    await worker?.close();
    await stack?.close();
  });

  async function soundAtBothWidths(name: string, path: string, expectedStatus: number, more?: (v: Visit) => Promise<void> | void) {
    for (const viewport of Object.keys(VIEWPORTS) as ViewportName[]) {
      const v = await visit(name, path, viewport, expectedStatus);
      try {
        await expectSoundPage(v, expectedStatus);
        await more?.(v);
      } finally {
        await v.context.close();
      }
    }
  }

  it("product page: no errors, accessible, labelled, keyboard-reachable, at both widths", async () => {
    await soundAtBothWidths("product", `/products/${TYPICAL}`, 200, async (v) => {
      const s = v.structure;
      // Measured from a cold image cache (each visit has a fresh context), lazy images scrolled in.
      console.log(`CLS of the product page at ${v.page.viewportSize()?.width}px: ${v.cls.toFixed(4)} (${v.shifts.length} shifts)`);
      expect(s.recommendationLinks.length, "a complete product shows recommendations").toBeGreaterThan(0);

      // Price and availability say what they are to a screen reader.
      const summary = await v.page.locator(".summary").ariaSnapshot();
      expect(summary).toMatch(/Price:?\s*\$[\d,]+\.\d\d/);
      expect(summary).toMatch(/Availability:?\s*(In stock|Only \d+ left|Out of stock)/);
      const recommendations = await v.page.locator(".recommendations").ariaSnapshot();
      expect(recommendations).toMatch(/Price:?\s*\$[\d,]+\.\d\d/);

      // Images below the fold wait for the visitor; the main photo does not.
      const viewportHeight = v.page.viewportSize()!.height;
      const [main, ...rest] = v.images;
      expect(main?.gallery, "the first image is the main product photo").toBe(true);
      expect(main?.loading, "the main photo loads at once").not.toBe("lazy");
      for (const img of rest.filter((i) => i.top >= viewportHeight)) {
        expect(img.loading, `${img.src} is below the fold`).toBe("lazy");
      }

      // The keyboard reaches the home link and every recommendation, visibly.
      const stops = await tabThrough(v.page);
      const hrefs = stops.map((stop) => stop.href);
      expect(hrefs, "focus reaches the home link").toContain("/");
      for (const href of s.recommendationLinks) expect(hrefs, `focus reaches ${href}`).toContain(href);
      expectVisibleFocus(stops);
    });
  });

  it("404 page: no errors, accessible, a way back home", async () => {
    await soundAtBothWidths("404", `/products/${NOT_FOUND}`, 404, async (v) => {
      expect(v.structure.h1[0]).toBe("Product not found");
      expect(v.structure.jsonLd).toEqual([]);
      const stops = await tabThrough(v.page);
      expect(stops.map((stop) => stop.text)).toContain("Back to the home page");
      expectVisibleFocus(stops);
    });
  });

  it("home page: no errors, accessible", async () => {
    await soundAtBothWidths("home", "/", 200, async (v) => {
      const stops = await tabThrough(v.page);
      expect(stops.filter((stop) => stop.href?.startsWith("/products/")).length).toBeGreaterThan(0);
      expectVisibleFocus(stops);
    });
  });

  it("product page with reviews and recommendations defaulted: no errors, accessible", async () => {
    await injectFault(stack, { service: "reviews", down: "500" });
    await injectFault(stack, { service: "recommendations", down: "500" });
    try {
      await soundAtBothWidths("product-defaulted", `/products/${DEFAULTED}`, 200, async (v) => {
        expect(v.headers["cache-degraded"]).toMatch(/reviews/);
        expect(v.headers["cache-degraded"]).toMatch(/recommendations/);
        expect(await v.page.locator(".reviews").textContent()).toContain("Reviews are unavailable right now.");
        expect(v.structure.recommendationLinks).toEqual([]);
        const jsonLd = parseJsonLd(v.structure);
        expect(jsonLd.aggregateRating).toBeUndefined();
        expectVisibleFocus(await tabThrough(v.page));
      });
    } finally {
      await clearFaults(stack);
    }
  });

  it("a streamed page: the price is painted before the reviews arrive, then the reviews in their place", async () => {
    // The reviews' and recommendations' services hold their answers until the faults change.
    await injectFault(stack, { service: "reviews", down: "hang" });
    await injectFault(stack, { service: "recommendations", down: "hang" });
    const { width, height } = VIEWPORTS.desktop;
    const context = await browser.newContext({ viewport: { width, height } });
    const problems: string[] = [];
    try {
      const page = await context.newPage();
      page.on("console", (message) => message.type() === "error" && problems.push(message.text()));
      page.on("pageerror", (error) => problems.push(error.message));
      const loaded = page.goto(`${base}/products/${STREAMED}`, { waitUntil: "load" });
      await page.locator(".price-now").waitFor({ state: "visible" });
      // Painted: the browser's first contentful paint is in, while the reviews are still held at the origin.
      await page.waitForFunction("performance.getEntriesByType('paint').some((entry) => entry.name === 'first-contentful-paint')");
      expect(await page.locator(".reviews").count()).toBe(0);
      await clearFaults(stack);
      const response = await loaded;
      expect(response?.headers()["cache-status"]).toContain('detail="reviews streamed"');
      expect(await page.locator(".reviews").textContent()).not.toContain("Reviews are unavailable right now.");
      expect(await page.locator(".recommendations a").count()).toBeGreaterThan(0);
      expect(await page.locator("h1").count()).toBe(1);
      // No CSP violation or script error: the pieces are plain HTML in place.
      expect(problems).toEqual([]);
    } finally {
      await clearFaults(stack);
      await context.close();
    }
  });

  it("a long unbroken title wraps instead of widening the page on a phone", async () => {
    const title = `Ultralight${"Supercalifragilistic".repeat(6)}Jacket`;
    const changed = await stack.admin(`/__admin/products/${LONG_TITLE}`, { body: { title } });
    expect(changed.product.title).toBe(title);
    const v = await visit("product-long-title", `/products/${LONG_TITLE}`, "phone");
    try {
      await expectSoundPage(v, 200);
      expect(v.structure.h1[0]).toBe(title);
    } finally {
      await v.context.close();
    }
  });

  it("schema.org Product JSON-LD says what the page shows, for each stock state", async () => {
    const ids = [TYPICAL!, productWithStock(5000, "in_stock"), productWithStock(5000, "low_stock"), productWithStock(5000, "out_of_stock"), "p-004003"];
    for (const id of ids) {
      const v = await visit(`jsonld-${id}`, `/products/${id}`, "desktop", 200, { screenshot: false });
      try {
        expect(v.status).toBe(200);
        expect(v.problems).toEqual([]);
        const s = v.structure;
        const data = parseJsonLd(s);
        const origin = (await (await fetch(`${stack.origin.url}/products/${id}`)).json()) as { title: string };
        expect(data.name, "JSON-LD name is the origin's title").toBe(origin.title);
        expect(s.h1[0], "the h1 shows the same title").toBe(data.name);
        expect(data.sku).toBe(id);

        const offer = data.offers as Record<string, any>;
        expect(offer["@type"]).toBe("Offer");
        expect(offer.priceCurrency).toMatch(/^[A-Z]{3}$/);
        expect(offer.price).toMatch(/^\d+(\.\d+)?$/);
        const shown = new Intl.NumberFormat("en-US", { style: "currency", currency: offer.priceCurrency }).format(Number(offer.price));
        expect(s.shownPrice, "shown price = JSON-LD price and currency").toBe(shown);

        const pattern = SCHEMA_AVAILABILITY_TEXT[offer.availability as string];
        expect(pattern, `known schema.org availability ${offer.availability}`).toBeDefined();
        expect(s.shownAvailability).toMatch(pattern!);
      } finally {
        await v.context.close();
      }
    }
  });

  it("omits availability from JSON-LD when inventory is unknown, and says so on the page", async () => {
    const path = `/products/${UNKNOWN_STOCK}`;
    expect((await fetch(base + path)).status).toBe(200); // inventory cached, fresh for 1 s
    await sleep(PAST_SHORT_TTL_MS);
    await injectFault(stack, { service: "inventory", down: "500" });
    try {
      const v = await visit("product-unknown-stock", path, "desktop");
      try {
        await expectSoundPage(v, 200);
        expect(v.headers["cache-degraded"]).toMatch(/inventory/);
        expect(v.structure.shownAvailability).toBe(AVAILABILITY_UNKNOWN_TEXT);
        expect(v.structure.availabilityClass).toContain("availability--unknown");
        const offer = parseJsonLd(v.structure).offers as Record<string, unknown>;
        expect(offer).not.toHaveProperty("availability");
        expect(offer.price).toBeDefined();
        const summary = await v.page.locator(".summary").ariaSnapshot();
        expect(summary).toMatch(/Availability:?\s*Availability unknown/);
      } finally {
        await v.context.close();
      }
    } finally {
      await clearFaults(stack);
    }
  });

  it("page weight: product HTML under 30 KB, styles inline, no scripts to fetch", async () => {
    const sizes: { id: string; bytes: number }[] = [];
    const ids = Array.from({ length: 50 }, (_, i) => productId(i + 1));
    // Two pages at a time: each asks the origin for four resources.
    for (let i = 0; i < ids.length; i += 2) {
      await Promise.all(
        ids.slice(i, i + 2).map(async (id) => {
          const response = await fetch(`${base}/products/${id}`);
          const html = await response.text();
          expect(response.status, id).toBe(200);
          expect(html).toContain("<h1>");
          sizes.push({ id, bytes: Buffer.byteLength(html, "utf8") });
        }),
      );
    }
    const typical = await fetch(`${base}/products/${TYPICAL}`);
    const typicalHtml = await typical.text();
    const typicalBytes = Buffer.byteLength(typicalHtml, "utf8");
    const largest = sizes.reduce((a, b) => (b.bytes > a.bytes ? b : a));
    const median = [...sizes].sort((a, b) => a.bytes - b.bytes)[Math.floor(sizes.length / 2)]!;
    console.log(
      `page weight (uncompressed HTML): typical ${TYPICAL} ${typicalBytes} B; ` +
        `of p-000001..p-000050: median ${median.bytes} B, largest ${largest.id} ${largest.bytes} B (limit ${MAX_PAGE_BYTES} B)`,
    );
    expect(typicalBytes).toBeLessThan(MAX_PAGE_BYTES);
    expect(largest.bytes).toBeLessThan(MAX_PAGE_BYTES);
    expect(typicalHtml).not.toMatch(/<link[^>]+rel="?stylesheet/);
    expect(typicalHtml).not.toMatch(/<script[^>]+src=/);
  });

  // Last: an open product breaker would turn later pages into 503s too.
  it("503 page: no errors, accessible, says when to retry", async () => {
    await injectFault(stack, { service: "product", down: "500" });
    try {
      await soundAtBothWidths("503", `/products/${UNAVAILABLE}`, 503, async (v) => {
        expect(v.headers["retry-after"]).toMatch(/^\d+$/);
        expect(v.structure.h1[0]).toBe("Temporarily unavailable");
        expect(await v.page.locator("[role=status]").textContent()).toMatch(/retry in \d+ seconds/);
        const stops = await tabThrough(v.page);
        expect(stops.map((stop) => stop.text)).toContain("Back to the home page");
        expectVisibleFocus(stops);
      });
    } finally {
      await clearFaults(stack);
    }
  });
});
