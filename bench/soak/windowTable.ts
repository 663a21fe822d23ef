// The soak's table: one Markdown row per window, printed as each ends (its
// chart is bench/lib/chart.ts's lineChartSvg). The floods' tables, with
// `--flood`: floodTables.ts.
import { PAGE_RESOURCES } from "../../src/origin/resources";
import type { CancelCounts, DepartingCounts } from "./cancel";
import type { Change } from "../lib/probe";
import { statusText, topCommands, total } from "./countsText";

export interface Window {
  label: string;
  /** Seconds since the first window began, at this window's end. */
  endS: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** wrk's answers by class ("2xx": n). */
  statuses: Record<string, number>;
  socketErrors: number;
  timeouts: number;
  cancel: CancelCounts | null;
  /** With `--departing N`: the departing visitors' counts in the window, all instances (absent without it). */
  departing?: DepartingCounts;
  /** Requests the demo origin received (all services), and by service. */
  originRequests: number;
  originByService: Record<string, number>;
  /** Calls redis-server ran (INFO commandstats: a script run and each call inside it count once each), by command. */
  redisCalls: Record<string, number>;
  /** Commands the gateway sent to redis-server (MONITOR: what Upstash would bill), by command. */
  redisSent: Record<string, number>;
  /** The same by command and first key's shape (`evalsha pp:v1:p:<id>`): which work sent them. */
  redisSentByKey: Record<string, number>;
  /** Bytes between redis-server and its clients but the census (INFO stats' net input + output, less MONITOR's stream). */
  redisBytes: number;
  /** The location tier's phase: "on" / "off", and whether the window is in the first minute after the isolates restarted. */
  phase: { location: "on" | "off"; afterRestart: boolean; restarts: number };
  /** Per instance: what its status and heap said. */
  instances: Change[];
  /** Lines of the workers' logs in this window: "unhandled_error", "Cannot perform I/O", workerd's cross-request promise warning. */
  logs: { unhandled: number; io: number; crossRequest: number };
  /** CPU cores used on average: workerd (all instances), and processes not ours. */
  cpu: { workerd: number; others: number };
}

const COLUMNS = [
  "window",
  "req/s",
  "p50 ms",
  "p99 ms",
  "2xx",
  "4xx",
  "5xx",
  "sock err / timeouts",
  "cancel sent / in flight",
  "l1 / location / l2 / origin %",
  "location hit % · purged / unvouched",
  "origin: worker fetch / err / shed · origin got",
  `origin got per page: ${PAGE_RESOURCES.join(" / ")}`,
  "Redis per page: scripts / MGET · all calls",
  "Redis sent per page (MONITOR): all · top commands",
  "shed busy / past share → stale / refused",
  "L2 skip / fail / drop / breaker-counted time-outs / errors / outages dismissed by a probe",
  "breaker changes",
  "slots use / queue / reclaimed",
  "fills flight / taken",
  "heap MB found→after GC (L1)",
  "unhandled / I/O / cross-req lines",
  "cores workerd / others",
  "workerd CPU-ms per page",
];

/** The departing visitors' column, after the cancellers' (with `--departing N` only). */
const DEPARTING_COLUMN = "departing sent / left in flight / left unsent / answered (by status)";

/** `departing`: with the departing visitors' column (`--departing N`). */
export function tableHead(departing = false): string {
  const columns = departing ? COLUMNS.flatMap((c) => (c === "cancel sent / in flight" ? [c, DEPARTING_COLUMN] : [c])) : COLUMNS;
  return `| ${columns.join(" | ")} |\n|${columns.map((_, i) => (i ? " ---: " : " --- ")).join("|")}|`;
}

/** A departing visitors' count: sent / left in flight / left unsent / answered (by status). */
export const departingText = (d: DepartingCounts) =>
  `${d.sent} / ${d.abortedInFlight} / ${d.abortedUnsent} / ${d.answered}${d.answered ? ` (${statusText(d.statuses)})` : ""}`;

/** Sum of a field over instances, or null if any instance lacks it. */
function sum<T>(changes: Change[], pick: (change: Change) => T | null | undefined, keys: (keyof T)[]): number[] | null {
  const values = changes.map(pick);
  if (values.some((v) => v === null || v === undefined)) return null;
  return keys.map((key) => values.reduce((total, v) => total + Number(v![key]), 0));
}

const na = (values: (number | string)[] | null, sep = " / ") => (values ? values.join(sep) : "n/a");

/** Pages wrk got answers for in the window. */
export const pagesOf = (w: Window) => Object.values(w.statuses).reduce((n, c) => n + c, 0);
function perPage(w: Window, count: number): string {
  const pages = pagesOf(w);
  return pages ? (count / pages).toFixed(3) : "n/a";
}

/** The tier's calls to Redis per page: script runs (EVAL*, EVALSHA*) and MGETs, which it sends itself, then every call Redis ran. */
function redisPerPage(w: Window): string {
  const calls = Object.entries(w.redisCalls);
  const scripts = calls.filter(([name]) => name.startsWith("eval")).reduce((n, [, c]) => n + c, 0);
  const all = calls.reduce((n, [, c]) => n + c, 0);
  return `${perPage(w, scripts)} / ${perPage(w, w.redisCalls.mget ?? 0)} · ${perPage(w, all)}`;
}

function shedText(shed: number[] | null): string {
  return shed ? `${shed[0]} / ${shed[1]} → ${shed[2]} / ${shed[3]}` : "n/a";
}

export function tableRow(w: Window): string {
  const tiers = sum(w.instances, (c) => c.tiers, ["l1", "location", "l2", "origin", "failed"]);
  const location = sum(w.instances, (c) => c.location, ["lookups", "hits", "purged", "unvouched"]);
  const answers = tiers ? tiers.reduce((a, b) => a + b, 0) : 0;
  const breakers = sum(w.instances, (c) => c.breakers, ["count"]);
  const exact = w.instances.every((c) => c.breakers?.exact);
  const names = [...new Set(w.instances.flatMap((c) => c.breakers?.names ?? []))];
  const cells = [
    w.label,
    Math.round(w.rps),
    w.p50Ms,
    w.p99Ms,
    w.statuses["2xx"] ?? 0,
    w.statuses["4xx"] ?? 0,
    w.statuses["5xx"] ?? 0,
    `${w.socketErrors} / ${w.timeouts}`,
    w.cancel ? `${w.cancel.sent} / ${w.cancel.abortedInFlight}` : "–",
    ...(w.departing ? [departingText(w.departing)] : []),
    tiers && answers
      ? tiers
          .slice(0, 4)
          .map((n) => Math.round((100 * n) / answers))
          .join(" / ")
      : "n/a",
    location ? `${location[0] ? Math.round((100 * location[1]!) / location[0]) : "–"} · ${location[2]} / ${location[3]}` : "off",
    `${na(sum(w.instances, (c) => c.workerOrigin, ["fetches", "errors", "shed"]))} · ${w.originRequests}`,
    PAGE_RESOURCES.map((name) => perPage(w, w.originByService[name] ?? 0)).join(" / "),
    redisPerPage(w),
    `${perPage(w, total(w.redisSent))} · ${topCommands(w.redisSent, pagesOf(w), 4)}`,
    shedText(sum(w.instances, (c) => c.shed, ["busy", "overShare", "stale", "refused"])),
    na(sum(w.instances, (c) => c.l2, ["skipped", "failures", "droppedWrites", "countedTimeouts", "countedErrors", "outagesDismissed"])),
    breakers ? `${exact ? "" : "≥"}${breakers[0]}${names.length ? ` (${names.join(", ")})` : ""}` : "n/a",
    na(sum(w.instances, (c) => c.slots, ["inUse", "queued", "reclaimed"])),
    na(sum(w.instances, (c) => c.fills, ["inFlight", "takenOver"])),
    w.instances.map((c) => `${c.heap ? `${c.heap.usedMB}→${c.heap.afterGcMB}` : "n/a"} (${c.l1MB ?? "n/a"})`).join(" · "),
    `${w.logs.unhandled} / ${w.logs.io} / ${w.logs.crossRequest}`,
    `${w.cpu.workerd.toFixed(2)} / ${w.cpu.others.toFixed(2)}`,
    // Under a closed loop the isolates are saturated: req/s is their cores ÷ this, so a change in req/s is a change here or in the machine.
    w.rps ? ((1000 * w.cpu.workerd) / w.rps).toFixed(2) : "n/a",
  ];
  return `| ${cells.join(" | ")} |`;
}
