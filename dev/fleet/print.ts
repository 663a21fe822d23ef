// How `npm run fleet` (main.ts) prints the fleet's figures: tables, and a
// chart per minute of what is better seen than read (hit ratio, pages,
// 503s, origin calls, purge reach).
import { RESOURCE_NAMES } from "../../src/origin/resources";
import { ANSWER_TIERS } from "../../src/observability/fleetPoints";
import { num, type FleetFigures, type Row } from "./fleetTables";

const pct = (value: number | null) => (value === null ? "—" : `${(value * 100).toFixed(1)}%`);
const count = (value: number) => (Number.isInteger(value) ? value.toLocaleString("en-US") : value.toFixed(1));
const ms = (value: number | null) => (value === null ? "—" : `${Math.round(value)} ms`);
const clock = (unixSeconds: number) => new Date(unixSeconds * 1000).toISOString().slice(11, 16);

function table(headers: string[], rows: string[][]): string {
  const widths = headers.map((header, i) => Math.max(header.length, ...rows.map((row) => (row[i] ?? "").length)));
  const line = (cells: string[]) => cells.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join("  ");
  return [line(headers), widths.map((w) => "─".repeat(w)).join("  "), ...rows.map(line)].join("\n");
}

const BLOCKS = " ▏▎▍▌▋▊▉█";
/** A bar of `width` characters for value/max, in eighths. */
function bar(value: number, max: number, width = 40): string {
  if (max <= 0 || value <= 0) return "";
  const eighths = Math.max(1, Math.round((value / max) * width * 8));
  return "█".repeat(Math.floor(eighths / 8)) + (eighths % 8 ? BLOCKS[eighths % 8] : "");
}

/** One chart: a row per minute, a bar for its value. */
function chart(title: string, figures: FleetFigures, value: (minute: FleetFigures["minutes"][number]) => number | null, label: (v: number) => string): string {
  const values = figures.minutes.map(value);
  const max = Math.max(0, ...values.map((v) => v ?? 0));
  const lines = figures.minutes.map((minute, i) => {
    const v = values[i];
    return `  ${clock(minute.minute)} ${v === null || v === undefined ? "—".padStart(9) : label(v).padStart(9)} ${v ? bar(v, max) : ""}`;
  });
  return [`${title}`, ...lines].join("\n");
}

/**
 * Table rows: `labels` as they are (an isolate's id is hex, and one of only
 * digits is still a name, not a count), then `counts` as numbers (the SQL
 * API may give them as strings).
 */
function rowsOf(rows: Row[], labels: string[], counts: string[]): string[][] {
  return rows.map((row) => [...labels.map((column) => String(row[column] ?? "")), ...counts.map((column) => count(num(row[column])))]);
}

export function printFigures(figures: FleetFigures): string {
  const t = figures.totals;
  const out: string[] = [];
  out.push(
    `The fleet, last ${figures.sinceSeconds >= 3600 ? `${(figures.sinceSeconds / 3600).toFixed(1)} h` : `${Math.round(figures.sinceSeconds / 60)} min`}:`,
  );
  out.push(
    table(
      ["figure", "value"],
      [
        ["pages", count(t.pages)],
        ["  200", count(t.ok)],
        ["  404 (absent, filtered)", count(t.notFound)],
        ["  503 or 429", count(t.unavailable)],
        ["    of which shed", count(t.shed)],
        ["  visitor left first", count(t.left)],
        ["hit ratio (resource answers from L1, location, L2)", pct(t.hitRatio)],
        ["stale / stale-if-error answers", `${count(t.stale)} / ${count(t.staleIfError)}`],
        ["defaulted sections", count(t.defaultedSections)],
        ["origin calls (fills and refreshes)", count(t.originFetches)],
        ["  failed / not made (shed, breaker open)", `${count(t.originErrors)} / ${count(t.originShed)}`],
        ["origin calls per page", t.originFetchesPerPage === null ? "—" : t.originFetchesPerPage.toFixed(3)],
        ["L2 calls per page (its request's)", t.l2CallsPerPage === null ? "—" : t.l2CallsPerPage.toFixed(3)],
        ["purge arrivals", count(t.purges.arrivals)],
        ["  reach p50 / p99 / slowest", `${ms(t.purges.p50Ms)} / ${ms(t.purges.p99Ms)} / ${ms(t.purges.maxMs)}`],
      ],
    ),
  );
  out.push("");
  out.push("Which tier answered each resource:");
  out.push(
    table(
      ["resource", ...ANSWER_TIERS, "hit ratio"],
      RESOURCE_NAMES.map((resource) => {
        const tiers = figures.resources[resource];
        const all = ANSWER_TIERS.reduce((sum, tier) => sum + tiers[tier], 0);
        return [resource, ...ANSWER_TIERS.map((tier) => count(tiers[tier])), pct(all > 0 ? (tiers.l1 + tiers.location + tiers.l2) / all : null)];
      }),
    ),
  );
  out.push("");
  out.push("Per minute (UTC):");
  out.push(
    table(
      ["minute", "pages", "200", "404", "503/429", "shed", "left", "hit ratio", "origin", "failed", "L2/page", "purge p99"],
      figures.minutes.map((m) => [
        clock(m.minute),
        count(m.pages),
        count(m.ok),
        count(m.notFound),
        count(m.unavailable),
        count(m.shed),
        count(m.left),
        pct(m.hitRatio),
        count(m.originFetches),
        count(m.originErrors),
        m.l2CallsPerPage === null ? "—" : m.l2CallsPerPage.toFixed(2),
        ms(m.purgeReachP99Ms),
      ]),
    ),
  );
  if (figures.minutes.length > 1) {
    out.push("");
    out.push(chart("Hit ratio", figures, (m) => m.hitRatio, pct));
    out.push(chart("Pages", figures, (m) => m.pages, count));
    out.push(chart("503 or 429 (shed or failed)", figures, (m) => m.unavailable, count));
    out.push(chart("Origin calls", figures, (m) => m.originFetches, count));
    out.push(chart("Purge reach p99", figures, (m) => m.purgeReachP99Ms, ms));
  }
  out.push("");
  out.push("Origin calls by service and outcome:");
  out.push(table(["service", "outcome", "calls"], rowsOf(figures.services, ["service", "outcome"], ["calls"])));
  out.push("");
  out.push("Where pages were shed or 503:");
  out.push(
    table(
      ["colo", "pages", "503/429", "shed", "left", "stale-if-error"],
      rowsOf(figures.locations, ["colo"], ["pages", "unavailable", "shed", "left_early", "stale_if_error"]),
    ),
  );
  out.push("");
  out.push("Isolates (the name each status page shows):");
  out.push(
    table(
      ["isolate", "colo", "pages", "200", "503/429", ...ANSWER_TIERS],
      rowsOf(figures.isolates, ["isolate", "colo"], ["pages", "ok", "unavailable", ...ANSWER_TIERS]),
    ),
  );
  out.push("");
  out.push("Breaker changes:");
  out.push(
    figures.breakers.length === 0
      ? "  none"
      : table(
          ["minute", "breaker", "state", "changes"],
          figures.breakers.map((row) => [clock(num(row.minute)), String(row.breaker), String(row.state), count(num(row.changes))]),
        ),
  );
  return out.join("\n");
}
