// bench:chaos's checks of the isolates themselves: during the load, each
// L1's evictions (what the oracle needs to tell a page an LRU
// dropped from one the tier lost) and admission's state (in the JSON); after it, the work their status says is
// under way back to 0 (fills, queued sends, cold pages in progress or
// waiting, background fills; origin slots through the soak's slotsFreed),
// and each heap (beyond L1) flat against its reading after the warm-up.
import { setTimeout as sleep } from "node:timers/promises";
import { statusOf, type Snapshot } from "../lib/probe";
import type { L1Sample } from "./oracle";
import { HEAP_FLAT } from "./plan";

/** The status gauges of work under way (src/observability/statusModel.ts), by path: 0 on every isolate once it is idle. */
const GAUGES = [
  "fills.inFlight",
  "fills.outbox.queued",
  "overload.admission.coldPages",
  "overload.admission.coldPagesQueued",
  "overload.departures.backgroundFills",
] as const;

const read = (value: unknown, path: string): number | undefined => {
  for (const key of path.split(".")) value = value !== null && typeof value === "object" ? (value as Record<string, unknown>)[key] : undefined;
  return typeof value === "number" ? value : undefined;
};

/** Reads every instance's L1 counts once a second (a status each: two small requests a second beside 200). */
export function sampleL1(targets: readonly string[], now: () => number): { samples: L1Sample[]; stop(): Promise<void> } {
  const samples: L1Sample[] = [];
  const controller = new AbortController();
  const loop = (async () => {
    while (!controller.signal.aborted) {
      await Promise.all(
        targets.map(async (url, inst) => {
          const at = now();
          const status = await statusOf(url);
          const admission = status?.overload?.admission as Record<string, unknown> | undefined;
          if (status?.l1.evictions !== undefined) samples.push({ inst, at, evictions: status.l1.evictions, ...(admission ? { admission } : {}) });
        }),
      );
      await sleep(1000, undefined, { signal: controller.signal }).catch(() => undefined);
    }
  })();
  return {
    samples,
    stop: async () => {
      controller.abort();
      await loop;
    },
  };
}

/** Polls every instance's status every 250 ms, 10 s at most, until every gauge the status has is 0 (summed over instances). */
export async function workSettled(targets: readonly string[]): Promise<{ ms: number | null; gauges: Record<string, number | "n/a">; ok: boolean | null }> {
  const started = Date.now();
  let gauges: Record<string, number | "n/a"> = {};
  for (;;) {
    const statuses = await Promise.all(targets.map(statusOf));
    gauges = Object.fromEntries(
      GAUGES.map((path) => {
        const values = statuses.map((s) => read(s, path));
        return [path, values.every((v) => v === undefined) ? "n/a" : values.reduce<number>((sum, v) => sum + (v ?? 0), 0)];
      }),
    );
    const known = Object.values(gauges).filter((v) => v !== "n/a");
    if (known.every((v) => v === 0)) return { ms: Date.now() - started, gauges, ok: known.length ? true : null };
    if (Date.now() - started > 10_000) return { ms: null, gauges, ok: false };
    await sleep(250);
  }
}

/**
 * Per instance: the heap held beyond L1 (after a GC, less L1's own count of
 * its bytes, which grows by design up to L1_MAX_BYTES) at the end against
 * after the warm-up; flat when at most HEAP_FLAT.ratio × or + HEAP_FLAT.plusMB.
 */
export function heapFlat(afterWarmup: readonly Snapshot[], atEnd: readonly Snapshot[]) {
  const beyondL1 = (s: Snapshot | undefined) => (s?.heap && s.status ? Math.round((s.heap.afterGcMB - s.status.l1.bytes / 2 ** 20) * 10) / 10 : null);
  const instances = atEnd.map((end, i) => {
    const [a, b] = [beyondL1(afterWarmup[i]), beyondL1(end)];
    const heapMB = [afterWarmup[i]?.heap?.afterGcMB ?? null, end.heap?.afterGcMB ?? null] as const;
    if (a === null || b === null) return { heapMB, beyondL1MB: [a, b] as const, ratio: null, ok: null };
    const ok = b <= Math.max(a * HEAP_FLAT.ratio, a + HEAP_FLAT.plusMB);
    return { heapMB, beyondL1MB: [a, b] as const, ratio: Math.round((b / a) * 100) / 100, ok };
  });
  return { instances, ok: instances.some((i) => i.ok === null) ? null : instances.every((i) => i.ok) };
}
