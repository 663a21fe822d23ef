// The soak's table: one Markdown row per window, printed as each ends (its
// chart is bench/chart.ts's lineChartSvg).
import type { CancelCounts } from "./cancel";
import type { Change } from "./probe";

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
  /** Requests the demo origin received (all services), and by service. */
  originRequests: number;
  originByService: Record<string, number>;
  /** Calls redis-server ran (INFO commandstats: a script run and each call inside it count once each), by command. */
  redisCalls: Record<string, number>;
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
  "l1 / l2 / origin %",
  "origin: worker fetch / err / shed · origin got",
  "origin got per page: product / inventory / reviews / recs",
  "Redis per page: scripts / MGET · all calls",
  "L2 skip / fail / drop / breaker-counted time-outs / errors / outages dismissed by a probe",
  "breaker changes",
  "slots use / queue / reclaimed",
  "fills flight / taken",
  "heap MB found→after GC (L1)",
  "unhandled / I/O / cross-req lines",
  "cores workerd / others",
  "workerd CPU-ms per page",
];

export function tableHead(): string {
  return `| ${COLUMNS.join(" | ")} |\n|${COLUMNS.map((_, i) => (i ? " ---: " : " --- ")).join("|")}|`;
}

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

export function tableRow(w: Window): string {
  const tiers = sum(w.instances, (c) => c.tiers, ["l1", "l2", "origin", "failed"]);
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
    tiers && answers
      ? tiers
          .slice(0, 3)
          .map((n) => Math.round((100 * n) / answers))
          .join(" / ")
      : "n/a",
    `${na(sum(w.instances, (c) => c.workerOrigin, ["fetches", "errors", "shed"]))} · ${w.originRequests}`,
    ["product", "inventory", "reviews", "recommendations"].map((name) => perPage(w, w.originByService[name] ?? 0)).join(" / "),
    redisPerPage(w),
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
