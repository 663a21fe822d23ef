// The soak's location-tier summary (issue 31's Done-when): the windows
// grouped by phase (the location tier on or off; the minute after the
// isolates restarted, and the last minute before the next restart or the
// end, "steady"), each group's Redis commands sent, origin fetches, cost per
// million pages (bench/lib/cost.ts), and the issue's targets, pass / FAIL.
import { costPerMillion, usd, type Prices } from "../lib/cost";
import { pagesOf, type Window } from "./windowTable";
import type { LocationProbe } from "./restart";
import type { LocationServerStats } from "../../dev/harness/locationServer";

/** Issue 31's targets. */
const TARGET = { sentPerPage: 0.2, locationOverL1: 2 };
/** Windows in a minute (the soak's windows are 30 s). */
const MINUTE = 2;

interface Group {
  label: string;
  location: "on" | "off";
  kind: "steady" | "after restart";
  windows: Window[];
}

/**
 * Segments of windows between restarts; each gives its first minute when it
 * follows a restart, and its last minute (when that is not also its first) as steady.
 */
function phaseGroups(windows: readonly Window[]): Group[] {
  const segments: Window[][] = [];
  for (const w of windows) (segments[w.phase.restarts] ??= []).push(w);
  return segments.filter(Boolean).flatMap((segment) => {
    const location = segment[0]!.phase.location;
    const after = segment.filter((w) => w.phase.afterRestart);
    const rest = segment.filter((w) => !w.phase.afterRestart);
    const from = `${segment[0]!.label}–${segment.at(-1)!.label}`;
    return [
      ...(after.length
        ? [
            {
              label: `tier ${location}, minute after restart (${after[0]!.label}–${after.at(-1)!.label})`,
              location,
              kind: "after restart" as const,
              windows: after,
            },
          ]
        : []),
      ...(rest.length >= MINUTE
        ? [
            {
              label: `tier ${location}, steady: last minute of ${from} (${rest.at(-MINUTE)!.label}–${rest.at(-1)!.label})`,
              location,
              kind: "steady" as const,
              windows: rest.slice(-MINUTE),
            },
          ]
        : []),
    ];
  });
}

export interface GroupFigures {
  label: string;
  location: "on" | "off";
  kind: Group["kind"];
  pages: number;
  rps: number;
  p50Ms: number;
  sentPerPage: number;
  sentByCommand: Record<string, number>;
  /** Per page, by command and first key's shape. */
  sentByKey: Record<string, number>;
  originPerPage: number;
  locationShare: number | null;
  cpuMsPerPage: number;
  redisBytesPerPage: number;
  cost: { workers: number; redis: number; total: number };
}

const sumOf = (ws: readonly Window[], pick: (w: Window) => number) => ws.reduce((n, w) => n + pick(w), 0);
const total = (counts: Record<string, number>) => Object.values(counts).reduce((n, c) => n + c, 0);

function groupFigures(group: Group, prices: Prices): GroupFigures {
  const ws = group.windows;
  const pages = Math.max(1, sumOf(ws, pagesOf));
  const perPageOf = (pick: (w: Window) => Record<string, number>) => {
    const counts: Record<string, number> = {};
    for (const w of ws) for (const [name, n] of Object.entries(pick(w))) counts[name] = (counts[name] ?? 0) + n / pages;
    return counts;
  };
  const sentByCommand = perPageOf((w) => w.redisSent);
  const tier = (key: "l1" | "location" | "l2" | "origin" | "failed") => sumOf(ws, (w) => w.instances.reduce((n, c) => n + (c.tiers?.[key] ?? 0), 0));
  const answers = tier("l1") + tier("location") + tier("l2") + tier("origin") + tier("failed");
  // workerd's CPU: cores × the window's wall time (pages ÷ req/s).
  const cpuMs = sumOf(ws, (w) => (w.rps ? (1000 * w.cpu.workerd * pagesOf(w)) / w.rps : 0));
  const perPage = { cpuMs: cpuMs / pages, redisCommands: total(sentByCommand), redisBytes: sumOf(ws, (w) => w.redisBytes) / pages };
  const c = costPerMillion({ requests: 1, ...perPage, originFetches: sumOf(ws, (w) => w.originRequests) / pages }, prices);
  return {
    label: group.label,
    location: group.location,
    kind: group.kind,
    pages,
    rps: sumOf(ws, (w) => w.rps) / ws.length,
    p50Ms: Math.round((sumOf(ws, (w) => w.p50Ms) / ws.length) * 10) / 10,
    sentPerPage: perPage.redisCommands,
    sentByCommand,
    sentByKey: perPageOf((w) => w.redisSentByKey),
    originPerPage: sumOf(ws, (w) => w.originRequests) / pages,
    locationShare: answers ? tier("location") / answers : null,
    cpuMsPerPage: perPage.cpuMs,
    redisBytesPerPage: perPage.redisBytes,
    cost: { workers: c.usd.workers, redis: c.usd.redis, total: c.usd.total },
  };
}

const f3 = (n: number) => n.toFixed(3);
const pct = (n: number | null) => (n === null ? "n/a" : `${Math.round(100 * n)}%`);
const top = (byCommand: Record<string, number>, count = 6) =>
  Object.entries(byCommand)
    .sort((a, b) => b[1] - a[1])
    .slice(0, count)
    .map(([k, n]) => `${k} ${f3(n)}`)
    .join(", ") || "none";

/** One row per group. */
function phaseTable(figures: readonly GroupFigures[]): string {
  const head = [
    "| phase | pages | req/s | p50 ms (mean of windows) | Redis sent per page (MONITOR) | … by command | origin got per page | location share of answers | workerd CPU-ms per page | Redis bytes per page | per million pages: Workers / Redis / total |",
    "| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |",
  ];
  const rows = figures.map(
    (g) =>
      `| ${g.label} | ${g.pages.toLocaleString("en-US")} | ${Math.round(g.rps)} | ${g.p50Ms} | ${f3(g.sentPerPage)} | ${top(g.sentByCommand)} | ${f3(g.originPerPage)} | ${pct(g.locationShare)} | ${g.cpuMsPerPage.toFixed(2)} | ${Math.round(g.redisBytesPerPage)} | ${usd(g.cost.workers)} / ${usd(g.cost.redis)} / ${usd(g.cost.total)} |`,
  );
  const byKey = ["| phase | Redis commands sent per page, by command and first key (`<id>`: any product) |", "| --- | --- |"];
  return [...head, ...rows, "", ...byKey, ...figures.map((g) => `| ${g.label} | ${top(g.sentByKey, 10)} |`)].join("\n");
}

/** The probe's two passes. */
function probeTable(probes: readonly { label: string; probe: LocationProbe }[]): string {
  const head = [
    "| right after the restart at | pages | pass | deepest tier of each page (Cache-Status) | p50 ms, all | p50 ms, pages of the expected tier (n) | Server-Timing location;dur p50 ms | statuses |",
    "| --- | ---: | --- | --- | ---: | ---: | ---: | --- |",
  ];
  const rows = probes.flatMap(({ label, probe }) =>
    [probe.first, probe.again].map(
      (p, i) =>
        `| ${label} | ${probe.pages} | ${i ? "again (L1 expected)" : `first (${p.tier} expected)`} | ${Object.entries(p.byTier)
          .map(([k, n]) => `${k} ${n}`)
          .join(", ")} | ${p.p50Ms} | ${p.tierP50Ms ?? "n/a"} (${p.tierPages}) | ${p.locationDurP50Ms ?? "–"} | ${Object.entries(p.statuses)
          .map(([k, n]) => `${k}: ${n}`)
          .join(", ")} |`,
    ),
  );
  return [...head, ...rows].join("\n");
}

/** Issue 31's Done-when, from this run's figures: [target, value, verdict]. */
function phaseTargets(figures: readonly GroupFigures[], probes: readonly { label: string; probe: LocationProbe }[]): string[][] {
  const verdict = (ok: boolean | null) => (ok === null ? "n/a" : ok ? "pass" : "FAIL");
  const steadyOn = figures.find((g) => g.location === "on" && g.kind === "steady");
  const afterOn = figures.filter((g) => g.location === "on" && g.kind === "after restart");
  const steadyOff = figures.find((g) => g.location === "off" && g.kind === "steady");
  const rows: string[][] = [
    [
      `tier on, steady: Redis commands sent per page ≤ ${TARGET.sentPerPage}`,
      steadyOn ? `${f3(steadyOn.sentPerPage)}${steadyOff ? ` (tier off, steady: ${f3(steadyOff.sentPerPage)})` : ""}` : "n/a",
      verdict(steadyOn ? steadyOn.sentPerPage <= TARGET.sentPerPage : null),
    ],
    [
      "tier on, steady: Redis's share of the cost per million pages ≤ the Workers share",
      steadyOn
        ? `Redis ${usd(steadyOn.cost.redis)} vs Workers ${usd(steadyOn.cost.workers)}${steadyOff ? ` (tier off: ${usd(steadyOff.cost.redis)} vs ${usd(steadyOff.cost.workers)})` : ""}`
        : "n/a",
      verdict(steadyOn ? steadyOn.cost.redis <= steadyOn.cost.workers : null),
    ],
  ];
  for (const after of afterOn) {
    rows.push(
      [`${after.label}: Redis commands sent per page ≤ ${TARGET.sentPerPage}`, f3(after.sentPerPage), verdict(after.sentPerPage <= TARGET.sentPerPage)],
      [
        `${after.label}: origin fetches per page ≤ tier on, steady`,
        steadyOn ? `${f3(after.originPerPage)} vs ${f3(steadyOn.originPerPage)}` : "n/a",
        verdict(steadyOn ? after.originPerPage <= steadyOn.originPerPage : null),
      ],
    );
  }
  for (const { label, probe } of probes.filter((p) => p.probe.first.tier === "pp-location")) {
    const [location, l1] = [probe.first.tierP50Ms, probe.again.tierP50Ms];
    rows.push([
      `restart at ${label}: p50 of a page the location holds ≤ ${TARGET.locationOverL1} × an L1 hit's`,
      location !== null && l1 !== null ? `${location} ms vs ${l1} ms (${(location / Math.max(0.001, l1)).toFixed(2)}×)` : "n/a",
      verdict(location !== null && l1 !== null ? location <= TARGET.locationOverL1 * l1 : null),
    ]);
  }
  return rows;
}

/** The location tier's part of the report: phases (on / off, steady / the minute after a restart), the probes, issue 31's targets. */
/** `cache`: the location cache's own counts at the end of the run (null: the tier was never on). */
export function locationSection(
  windows: readonly Window[],
  probes: readonly { label: string; probe: LocationProbe }[],
  prices: Prices,
  cache: LocationServerStats | null,
) {
  const phases = phaseGroups(windows).map((group) => groupFigures(group, prices));
  const targets = phaseTargets(phases, probes);
  const cacheLine =
    cache &&
    `The location cache (dev/harness/locationServer.ts, a process of its own) at the end of the run: ${cache.entries.toLocaleString("en-US")} copies in ${(cache.bytes / 2 ** 20).toFixed(0)} MiB; ${cache.matches.toLocaleString("en-US")} lookups, ${cache.hits.toLocaleString("en-US")} found (${((100 * cache.hits) / Math.max(1, cache.matches)).toFixed(0)}%, copies past their purges included); ${cache.puts.toLocaleString("en-US")} puts, ${cache.refused} refused.`;
  const text = [
    ...(cacheLine ? [cacheLine, ""] : []),
    phaseTable(phases),
    ...(probes.length ? ["", probeTable(probes)] : []),
    "",
    ["| issue 31 target | value | verdict |", "| --- | --- | --- |", ...targets.map((c) => `| ${c.join(" | ")} |`)].join("\n"),
  ].join("\n");
  return { phases, targets, text };
}
