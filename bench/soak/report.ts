// The soak's table (one Markdown row per window, printed as each ends) and
// its chart: req/s and p99 over time, two stacked panels, hand-written SVG in
// the style of bench/peers/svg.ts.
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
  "window", "req/s", "p50 ms", "p99 ms", "2xx", "4xx", "5xx", "sock err / timeouts", "cancel sent / in flight",
  "l1 / l2 / origin %", "origin: worker fetch / err / shed · origin got", "origin got per page: product / inventory / reviews / recs", "Redis per page: scripts / MGET · all calls", "L2 skip / fail / drop / breaker-counted time-outs / errors / outages dismissed by a probe", "breaker changes",
  "slots use / queue / reclaimed", "fills flight / taken", "heap MB found→after GC (L1)", "unhandled / I/O / cross-req lines", "cores workerd / others", "workerd CPU-ms per page",
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
    tiers && answers ? tiers.slice(0, 3).map((n) => Math.round((100 * n) / answers)).join(" / ") : "n/a",
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

// ---------------------------------------------------------------- chart

const WIDTH = 980;
const PANEL_H = 190;
const MARGIN = { top: 78, right: 24, left: 78, gap: 46, bottom: 44 };

const esc = (text: string) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");

/** A round axis top: 1, 2 or 5 × a power of ten, at least `max`. */
function niceTop(max: number): number {
  const decade = 10 ** Math.floor(Math.log10(Math.max(max, 1e-9)));
  return [1, 2, 5, 10].map((k) => k * decade).find((top) => top >= max) ?? 10 * decade;
}

export function chartSvg(title: string, subtitle: string, windows: Window[]): string {
  const plotW = WIDTH - MARGIN.left - MARGIN.right;
  const height = MARGIN.top + 2 * PANEL_H + MARGIN.gap + MARGIN.bottom;
  const xMax = Math.max(...windows.map((w) => w.endS), 1);
  const x = (s: number) => MARGIN.left + (s / xMax) * plotW;
  const out = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" role="img" aria-label="${esc(title)}">`,
    `<style>text{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;fill:#1a1a1a}.t{font-size:17px;font-weight:600}.s{font-size:12px;fill:#555}.ax{font-size:11px;fill:#444}.v{font-size:10px}.p{font-size:12.5px;font-weight:600}</style>`,
    `<rect width="${WIDTH}" height="${height}" fill="#fff"/>`,
    `<text class="t" x="${MARGIN.left}" y="26">${esc(title)}</text>`,
    `<text class="s" x="${MARGIN.left}" y="45">${esc(subtitle)}</text>`,
  ];
  const panels = [
    { name: "req/s", color: "#2b6cb0", value: (w: Window) => w.rps, label: (v: number) => String(Math.round(v)) },
    { name: "p99 ms", color: "#c05621", value: (w: Window) => w.p99Ms, label: (v: number) => String(v) },
  ];
  panels.forEach((panel, i) => {
    const top0 = MARGIN.top + i * (PANEL_H + MARGIN.gap);
    const yTop = niceTop(Math.max(...windows.map(panel.value)) * 1.1);
    const y = (v: number) => top0 + PANEL_H - (v / yTop) * PANEL_H;
    for (let k = 0; k <= 4; k++) {
      const v = (yTop * k) / 4;
      out.push(`<line x1="${MARGIN.left}" x2="${WIDTH - MARGIN.right}" y1="${y(v).toFixed(1)}" y2="${y(v).toFixed(1)}" stroke="${k ? "#e3e3e3" : "#888"}"/>`);
      out.push(`<text class="ax" x="${MARGIN.left - 8}" y="${(y(v) + 4).toFixed(1)}" text-anchor="end">${+v.toPrecision(3)}</text>`);
    }
    out.push(`<text class="p" x="${MARGIN.left + 6}" y="${top0 - 8}" fill="${panel.color}">${panel.name}</text>`);
    const points = windows.map((w) => [x(w.endS), y(panel.value(w))] as const);
    out.push(`<polyline fill="none" stroke="${panel.color}" stroke-width="2" points="${points.map(([px, py]) => `${px.toFixed(1)},${py.toFixed(1)}`).join(" ")}"/>`);
    windows.forEach((w, j) => {
      const [px, py] = points[j]!;
      out.push(`<circle cx="${px.toFixed(1)}" cy="${py.toFixed(1)}" r="3.5" fill="${panel.color}"><title>${esc(`${w.label}: ${panel.label(panel.value(w))} ${panel.name}`)}</title></circle>`);
      if (windows.length <= 40) out.push(`<text class="v" x="${px.toFixed(1)}" y="${(py - 7).toFixed(1)}" text-anchor="middle">${panel.label(panel.value(w))}</text>`);
    });
  });
  // Time axis, under the lower panel.
  const axisY = MARGIN.top + 2 * PANEL_H + MARGIN.gap;
  const step = niceTop(xMax / 8);
  for (let s = 0; s <= xMax; s += step) out.push(`<text class="ax" x="${x(s).toFixed(1)}" y="${axisY + 16}" text-anchor="middle">${s}</text>`);
  out.push(`<text class="ax" x="${MARGIN.left + plotW / 2}" y="${axisY + 34}" text-anchor="middle">seconds since the load began (one point per window, at its end)</text>`);
  out.push("</svg>");
  return out.join("\n");
}
