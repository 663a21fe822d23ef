// Helpers for the fault tests: timed page requests read into what a visitor
// sees, origin faults through the demo origin's admin API, direct looks into
// L2 through the gateway, and catalog ids picked by what their data holds.
import { inventoryFor, productId, recommendationsFor, reviewsFor } from "../../dev/origin/catalog";
import { GATEWAY_TOKEN, PURGE_TOKEN, type Stack } from "./stack";
import type { WorkerInstance } from "./worker";
import type { ResourceName } from "../../src/origin/resources";

export interface Page {
  status: number;
  /** Wall time of the request, ms, as the visitor (the test) saw it. */
  ms: number;
  headers: Headers;
  html: string;
  cacheStatus: string;
  /** Sections that were defaulted, from `Cache-Degraded`; empty when none. */
  degraded: string[];
}

export async function page(worker: WorkerInstance, path: string, headers: Record<string, string> = {}): Promise<Page> {
  const started = performance.now();
  const response = await worker.fetch(path, { headers });
  const html = await response.text();
  const ms = performance.now() - started;
  const degraded = response.headers.get("cache-degraded");
  return {
    status: response.status,
    ms,
    headers: response.headers,
    html,
    cacheStatus: response.headers.get("cache-status") ?? "",
    degraded: degraded ? degraded.split(",").map((name) => name.trim()) : [],
  };
}

/** HTML-escaped as the templates escape text (Hono's escapeToBuffer). */
export function escapeHtml(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(/'/g, "&#39;");
}

/** A page's references to itself: its canonical link, og:url, and the JSON-LD Product's and Offer's url. */
export function selfUrls(html: string): { canonical?: string; ogUrl?: string; jsonLd?: string; jsonLdOffer?: string } {
  const script = /<script type="application\/ld\+json">([\s\S]*?)<\/script>/.exec(html)?.[1];
  const jsonLd = script ? (JSON.parse(script) as { url?: string; offers?: { url?: string } }) : undefined;
  return {
    canonical: /<link rel="canonical" href="([^"]*)"\/>/.exec(html)?.[1],
    ogUrl: /<meta property="og:url" content="([^"]*)"\/>/.exec(html)?.[1],
    jsonLd: jsonLd?.url,
    jsonLdOffer: jsonLd?.offers?.url,
  };
}

/** A Server-Timing metric's duration in ms (`l2;dur=101.5`), or undefined. */
export function serverTiming(headers: Headers, name: string): number | undefined {
  const header = headers.get("server-timing") ?? "";
  const metric = header.split(/,\s*/).find((part) => part.split(";")[0] === name);
  const duration = metric && /dur=([\d.]+)/.exec(metric)?.[1];
  return duration ? Number(duration) : undefined;
}

export interface OriginFault {
  service: ResourceName | "all";
  latencyMs?: number;
  errorRate?: number;
  down?: false | "500" | "refuse" | "hang";
  /** How ids the service holds nothing for are answered: 404 (the contract, default) or another 4xx such as 400 or 422. */
  unknownIdStatus?: number;
  /** Ids looked up in lower case and answered with the catalog's spelling (an origin that canonicalises case). */
  canonicalIds?: boolean;
}

export async function injectFault(stack: Stack, fault: OriginFault): Promise<void> {
  await stack.admin("/__admin/faults", { method: "PUT", body: fault });
}

export async function clearFaults(stack: Stack): Promise<void> {
  await stack.admin("/__admin/faults", { method: "DELETE" });
}

export async function resetCounters(stack: Stack): Promise<void> {
  await stack.admin("/__admin/counters/reset", { method: "POST" });
}

/** Origin fetches of one resource of one product since the last reset. */
export async function originFetches(stack: Stack, resource: string, id: string): Promise<number> {
  return (await stack.counters()).ids[`${resource}:${id}`] ?? 0;
}

/** /healthz's answer, and L2's state from the authenticated status (`l2.state`: /healthz tells the public nothing of it). */
export async function health(worker: WorkerInstance): Promise<{ ok: boolean; l2: string }> {
  const { ok } = (await (await worker.fetch("/healthz")).json()) as { ok: boolean };
  const status = await worker.fetch("/__status.json", { headers: { authorization: `Bearer ${PURGE_TOKEN}` } });
  return { ok, l2: status.ok ? ((await status.json()) as { l2: { state: string } }).l2.state : `status ${status.status}` };
}

/** One Redis command through the gateway, as @upstash/redis sends it; undefined when the gateway cannot answer. */
export async function gatewayCommand(stack: Stack, command: (string | number)[]): Promise<unknown> {
  try {
    const response = await fetch(stack.gateway.url, {
      method: "POST",
      headers: { authorization: `Bearer ${GATEWAY_TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify(command),
      signal: AbortSignal.timeout(1000),
    });
    if (!response.ok) {
      await response.body?.cancel();
      return undefined;
    }
    return ((await response.json()) as { result: unknown }).result;
  } catch {
    return undefined;
  }
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Polls `condition` every 50 ms; throws if it is still false after `timeoutMs`. */
export async function waitFor(what: string, condition: () => Promise<boolean> | boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(50);
  }
}

/**
 * Distinct catalog ids from `from` on whose product has reviews and
 * recommendations and is in stock (at least 5 available), so that a page
 * shows "In stock", a reviews summary and a recommendations list when
 * nothing fails. Each test takes its own range so that no cache is shared.
 */
export function completeProducts(from: number, count: number, catalogSize = 10_000): string[] {
  const ids: string[] = [];
  for (let index = from; ids.length < count && index <= catalogSize; index++) {
    if (reviewsFor(index) === null || recommendationsFor(index, catalogSize, "http://x") === null) continue;
    if (inventoryFor(index).status !== "in_stock") continue;
    ids.push(productId(index));
  }
  if (ids.length < count) throw new Error(`not enough complete products from ${from}`);
  return ids;
}
