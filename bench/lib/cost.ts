// What a million page views cost at published prices (bench/lib/prices.json):
// Workers requests and CPU-ms, Redis commands and bandwidth, and the origin
// fetches (counted, not priced: the origin is the shop's own). Marginal
// prices: beyond the plans' included allowances, without the base fee.
import { readFileSync } from "node:fs";
import { resolve } from "node:path";

export interface Prices {
  currency: string;
  workers: {
    plan: string;
    monthlyBaseUsd: number;
    requestsUsdPerMillion: number;
    requestsIncludedMillionsPerMonth: number;
    cpuMsUsdPerMillion: number;
    cpuMsIncludedMillionsPerMonth: number;
    source: string;
    checked: string;
    checkedHow: string;
  };
  redis: {
    plan: string;
    commandsUsdPer100k: number;
    bandwidthUsdPerGB: number;
    bandwidthIncludedGBPerMonth: number;
    source: string;
    checked: string;
    checkedHow: string;
  };
}

export function loadPrices(file = resolve("bench/lib/prices.json")): Prices {
  return JSON.parse(readFileSync(file, "utf8")) as Prices;
}

/** What one page view used. */
export interface PerPage {
  /** Worker requests (1 for a page). */
  requests: number;
  cpuMs: number;
  redisCommands: number;
  /** Bytes to and from Redis. */
  redisBytes: number;
  originFetches: number;
}

export interface CostPerMillion {
  usage: { requests: number; cpuMs: number; redisCommands: number; redisGB: number; originFetches: number };
  usd: { workersRequests: number; workersCpu: number; redisCommands: number; redisBandwidth: number; workers: number; redis: number; total: number };
}

export function costPerMillion(page: PerPage, prices: Prices): CostPerMillion {
  const M = 1_000_000;
  const usage = {
    requests: page.requests * M,
    cpuMs: page.cpuMs * M,
    redisCommands: page.redisCommands * M,
    redisGB: (page.redisBytes * M) / 1e9,
    originFetches: page.originFetches * M,
  };
  const w = prices.workers;
  const r = prices.redis;
  const workersRequests = (usage.requests / M) * w.requestsUsdPerMillion;
  const workersCpu = (usage.cpuMs / M) * w.cpuMsUsdPerMillion;
  const redisCommands = (usage.redisCommands / 100_000) * r.commandsUsdPer100k;
  const redisBandwidth = usage.redisGB * r.bandwidthUsdPerGB;
  const workers = workersRequests + workersCpu;
  const redis = redisCommands + redisBandwidth;
  return { usage, usd: { workersRequests, workersCpu, redisCommands, redisBandwidth, workers, redis, total: workers + redis } };
}

export const usd = (v: number) => `$${v >= 10 ? v.toFixed(2) : v >= 0.1 ? v.toFixed(3) : v.toFixed(4)}`;

/** One line: the money split, and whether Redis costs at most what Workers do. */
export function costLine(c: CostPerMillion): string {
  return (
    `Workers ${usd(c.usd.workers)} (requests ${usd(c.usd.workersRequests)} + CPU ${usd(c.usd.workersCpu)} for ${Math.round(c.usage.cpuMs).toLocaleString("en-US")} CPU-ms) · ` +
    `Redis ${usd(c.usd.redis)} (commands ${usd(c.usd.redisCommands)} for ${Math.round(c.usage.redisCommands).toLocaleString("en-US")} · bandwidth ${usd(c.usd.redisBandwidth)} for ${c.usage.redisGB.toFixed(2)} GB) · ` +
    `total ${usd(c.usd.total)} · origin fetches ${Math.round(c.usage.originFetches).toLocaleString("en-US")} (not priced) · ` +
    `Redis share ${c.usd.redis <= c.usd.workers ? "≤" : ">"} Workers share`
  );
}

/** The prices' provenance, for a report. */
export function pricesNote(p: Prices): string {
  const w = p.workers;
  const r = p.redis;
  return (
    `Prices (bench/lib/prices.json): ${w.plan}: $${w.requestsUsdPerMillion} per million requests beyond ${w.requestsIncludedMillionsPerMonth} M included, ` +
    `$${w.cpuMsUsdPerMillion} per million CPU-ms beyond ${w.cpuMsIncludedMillionsPerMonth} M included, $${w.monthlyBaseUsd}/month base (${w.source}, checked ${w.checked}: ${w.checkedHow}); ` +
    `${r.plan}: $${r.commandsUsdPer100k} per 100 K commands, bandwidth $${r.bandwidthUsdPerGB}/GB beyond ${r.bandwidthIncludedGBPerMonth} GB free (${r.source}, checked ${r.checked}: ${r.checkedHow}). ` +
    "Marginal: the base fee and the included allowances are not spread over the pages."
  );
}
