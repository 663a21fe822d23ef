// bench:peers' two SVG charts (bench/lib/chart.ts): p99 latency per phase with
// p50 marked, and origin requests per 1,000 pages per phase.
import { PAGE_RESOURCES } from "../../src/origin/resources";
import { barChartSvg, type BarSeries } from "../lib/chart";
import { find, originPerPage, present, type PeersReport } from "./figures";
import { compactMs, num } from "./format";
import { SCENARIO_LABELS, type ScenarioName } from "./plan";
import type { SystemName } from "./systems";

const SERIES: Record<SystemName, BarSeries> = {
  nginx: { name: "Nginx proxy_cache", color: "#2f7d32" },
  varnish: { name: "Varnish", color: "#6a3d9a" },
  tier: { name: "tier (defaults)", color: "#e07b00" },
  "tier-300s": { name: "tier (300 s, peers' freshness)", color: "#f2b66d" },
  "tier-location": { name: "tier, location tier on", color: "#b5651d" },
  "tier-off": { name: "tier, caching off (CACHING=off)", color: "#9e9e9e" },
};

const LATENCY_GROUPS: ScenarioName[] = ["fixed", "saturation", "cached", "origin-slow", "origin-down", "price-change", "redis-down"];
const ORIGIN_GROUPS: ScenarioName[] = ["warm-up", "fixed", "saturation", "origin-slow", "price-change"];

export function charts(report: PeersReport): { latency: string; origin: string } {
  const systems = present(report).map((key) => ({ key, ...SERIES[key] }));
  const when = `${report.startedAt.slice(0, 16).replace("T", " ")} UTC${report.settings.quick ? " · quick run" : ""}`;
  const lat = LATENCY_GROUPS.filter((sc) => report.rows.some((r) => r.scenario === sc));
  const latency = barChartSvg({
    title: "p99 latency per phase, p50 marked (wrk; lower is better)",
    subtitle: `saturation phases: closed loop, ${report.settings.connections} conn; the others paced at ${num(report.settings.rate ?? 0)} req/s (${report.settings.pacedConnections} conn) · Zipf(1.0), ${num(report.settings.catalogSize)} products · ${when} · log scale`,
    yLabel: "latency, ms (log scale)",
    groups: lat.map((sc) => SCENARIO_LABELS[sc]),
    series: systems,
    values: lat.map((sc) => systems.map((s) => find(report.rows, s.key, sc)?.load.p99Ms ?? null)),
    scale: "log",
    label: compactMs,
    marker: { values: lat.map((sc) => systems.map((s) => find(report.rows, s.key, sc)?.load.p50Ms ?? null)), legend: "p50" },
    note: (gi, si) => {
      const r = find(report.rows, systems[si]!.key, lat[gi]!);
      const rate = r ? r.load.errors / Math.max(1, r.load.requests) : 0;
      return rate >= 0.001 ? `${(rate * 100).toFixed(rate < 0.1 ? 1 : 0)}% err` : null;
    },
  });
  const org = ORIGIN_GROUPS.filter((sc) => report.rows.some((r) => r.scenario === sc));
  const origin = barChartSvg({
    title: "Origin requests per 1,000 pages (lower is better)",
    subtitle: `${PAGE_RESOURCES.join(" + ")}, counted by each system's own demo origin · ${when}`,
    yLabel: "origin requests per 1,000 pages",
    groups: org.map((sc) => SCENARIO_LABELS[sc]),
    series: systems,
    values: org.map((sc) =>
      systems.map((s) => {
        const r = find(report.rows, s.key, sc);
        return r ? originPerPage(r) * 1000 : null;
      }),
    ),
    scale: "linear",
    label: num,
  });
  return { latency, origin };
}
