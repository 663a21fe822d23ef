// bench:soak after the load: how long until no origin slot is held, then
// the cold products, one request each.
import { setTimeout as sleep } from "node:timers/promises";
import { PAGE_SUBJECT } from "../../src/origin/resources";
import { get, statusOf } from "../lib/probe";
import type { Workload } from "../lib/wrk";
import type { Servers } from "../stack";
import { COLD_RANKS } from "./plan";

/** Polls every instance's status every 250 ms, 10 s at most, until no origin limiter slot is in use. */
export async function slotsFreed(targets: string[]): Promise<{ slotsFreeMs: number | null; slotsKnown: boolean; slotsText: string }> {
  const drainStart = Date.now();
  let slotsFreeMs: number | null = null;
  let slotsKnown = true;
  while (Date.now() - drainStart < 10_000) {
    const slots = (await Promise.all(targets.map(statusOf))).map((s) => s?.originSlots);
    if (slots.some((s) => s === undefined)) {
      slotsKnown = false;
      break;
    }
    if (slots.every((s) => s!.inUse === 0)) {
      slotsFreeMs = Date.now() - drainStart;
      break;
    }
    await sleep(250);
  }
  const slotsText = !slotsKnown ? "n/a (no originSlots in the status)" : slotsFreeMs === null ? "still in use after 10 s" : `${slotsFreeMs} ms`;
  return { slotsFreeMs, slotsKnown, slotsText };
}

/** Each cold product (the tail's last ranks, never drawn) asked for once, and the origin's fetches of it; the table of them. */
export async function coldProducts(targets: string[], workload: Workload, servers: Servers) {
  await servers.origin.resetCounters();
  const cold = [];
  for (const [i, rank] of COLD_RANKS.entries()) {
    const id = workload.idOfRank(rank);
    cold.push({ id, rank, ...(await get(`${targets[i % targets.length]}/products/${id}`, 30_000)) });
  }
  const coldOrigin = await Promise.all(cold.map((c) => servers.origin.countsOf(c.id)));
  const coldRows = cold.map((c, i) => `| ${c.id} | ${c.rank} | ${c.status || "no answer"} | ${c.ms} | ${coldOrigin[i]![PAGE_SUBJECT] ?? 0} |`);
  const coldTable = [`| cold product | rank | status | ms | origin ${PAGE_SUBJECT} fetches |`, "| --- | ---: | ---: | ---: | ---: |", ...coldRows].join("\n");
  return { cold, coldTable };
}
