// bench:fleet's report: one row per fleet size, the figures against one
// isolate's, the issue's targets, and charts of each figure against the
// number of isolates (bench/results/fleet*.md, .svg, .json).
import { barChartSvg } from "../lib/chart";
import type { LogCounts } from "../lib/probe";
import type { Usage } from "./measure";
import { COLD_PAGES, DEPLOY_WINDOW_S, type FleetOptions, HERD_REQUESTS, REACH, STEADY_FACTOR, STORM, TARGETS } from "./plan";

export interface SizeResult {
  size: number;
  steady: Usage & { pages: number };
  /** The fleet's very first pages (one per isolate, L2 empty but for the filter). */
  firstStart: Usage;
  deploy: {
    restartMs: number;
    /** One page per new isolate right after the restart, and 2 s. */
    first: Usage;
    /** The load's minute after the deploy. */
    minute: Usage & { pages: number };
    /** Redis's commands (its own count, scripts' inner calls included) per DEPLOY_WINDOW_S after the deploy. */
    windows: number[];
    /** The steady stretch's median window, on the same count. */
    steadyWindow: number;
    /** From the deploy's load start until every window after is within STEADY_FACTOR of steady; null: not within the minute. */
    backToSteadyS: number | null;
  };
  reprice: { acknowledged: number; seconds: number; afterSeconds: number; afterCommands: number; l1Entries: number | null; usage: Usage };
  storm: {
    purges: number;
    ackP50Ms: number;
    reachP50Ms: number | null;
    reachP99Ms: number | null;
    reachMaxMs: number | null;
    missed: number;
    samples: number;
  };
  /** `servedAs`: how its pages got their product (Cache-Status), absent in runs from before it was counted. */
  herd: { statuses: Record<string, number>; fetches: Record<string, number>; servedAs?: Record<string, number> };
  /** The location cache's counts over the whole size (hits and lookups as it saw them), and the isolates' own verdicts on the parts (warm-up and steady). */
  location: { hits: number; matches: number; puts: number; verdicts?: Record<string, number> };
  /** Cold pages one at a time with the load stopped (COLD_PAGES): an upper bound of a page's cost in an isolate that sees little traffic. */
  cold: { pages: number; statuses: Record<string, number>; usage: Usage };
}

const round = (n: number, digits = 2) => Math.round(n * 10 ** digits) / 10 ** digits;
const kb = (bytes: number) => `${round(bytes / 1024, 1)} KB`;
const verdict = (ok: boolean) => (ok ? "PASS" : "**FAIL**");
const perSecond = (u: Usage) => (u.seconds > 0 ? u.commands / u.seconds : 0);
const perPage = (u: Usage & { pages: number }) => (u.pages > 0 ? u.commands / u.pages : 0);

/** A size's derived figures. */
function figures(r: SizeResult) {
  const steadyRate = perSecond(r.steady);
  const deployCommands = r.deploy.first.commands + r.deploy.minute.commands;
  const deploySeconds = r.deploy.first.seconds + r.deploy.minute.seconds;
  return {
    commandsPerSecond: steadyRate,
    commandsPerPage: perPage(r.steady),
    bytesPerPage: r.steady.pages ? (r.steady.bytesIn + r.steady.bytesOut) / r.steady.pages : 0,
    originPerPage: r.steady.pages ? r.steady.originFetches / r.steady.pages : 0,
    purposePerPage: Object.fromEntries(Object.entries(r.steady.byPurpose).map(([k, n]) => [k, r.steady.pages ? n / r.steady.pages : 0])),
    /** Bytes Redis sent per new isolate for its first page after the deploy. */
    newIsolateBytes: r.deploy.first.bytesOut / r.size,
    newIsolateCommands: r.deploy.first.commands / r.size,
    deployRatio: steadyRate > 0 && deploySeconds > 0 ? deployCommands / deploySeconds / steadyRate : 0,
    repriceBeyond: Math.max(0, r.reprice.afterCommands - steadyRate * r.reprice.afterSeconds),
    // The re-price's stretch against the steady load's rate over as long: what recording and reading it cost.
    repriceCommands: Math.max(0, r.reprice.usage.commands - steadyRate * r.reprice.usage.seconds),
    repriceBytesOut: Math.max(0, r.reprice.usage.bytesOut - (r.steady.bytesOut / Math.max(1, r.steady.seconds)) * r.reprice.usage.seconds),
  };
}

export function fleetReport(o: {
  head: string;
  options: FleetOptions;
  results: SizeResult[];
  logCounts: LogCounts;
  filterBuilt: boolean;
}): Record<string, string> {
  const { results, options } = o;
  const one = results.find((r) => r.size === 1) ?? results[0];
  const base = one ? figures(one) : null;
  const purposes = [...new Set(results.flatMap((r) => Object.keys(r.steady.byPurpose)))].sort();
  const rows = results.map((r) => {
    const f = figures(r);
    return `| ${r.size} | ${round(r.steady.pages / Math.max(1, r.steady.seconds), 1)} | ${round(f.commandsPerSecond, 1)} | ${round(f.commandsPerPage, 3)} | ${base ? `${round(f.commandsPerPage / base.commandsPerPage)}×` : ""} | ${purposes.map((p) => round(f.purposePerPage[p] ?? 0, 3)).join(" | ")} | ${kb(f.bytesPerPage)} | ${round(f.originPerPage, 3)} |`;
  });
  const deployRows = results.map((r) => {
    const f = figures(r);
    return `| ${r.size} | ${r.deploy.restartMs} | ${round(f.newIsolateCommands, 1)} | ${kb(f.newIsolateBytes)} | ${round(perPage(r.deploy.minute), 3)} | ${round(f.deployRatio)}× | ${r.deploy.backToSteadyS ?? `> ${options.afterDeployS}`} | ${r.deploy.windows.join(" ")} (steady ${r.deploy.steadyWindow}) |`;
  });
  const eventRows = results.map((r) => {
    const f = figures(r);
    const share = r.reprice.l1Entries ? `${round((100 * f.repriceBeyond) / r.reprice.l1Entries, 1)}% of ${r.reprice.l1Entries} L1 entries` : "n/a";
    const s = r.storm;
    const coldCell = `${round(r.cold.usage.commands / r.cold.pages, 2)} commands, ${kb((r.cold.usage.bytesIn + r.cold.usage.bytesOut) / r.cold.pages)}, ${round(r.cold.usage.originFetches / r.cold.pages, 2)} origin fetches`;
    return `| ${r.size} | ${coldCell} | ${r.reprice.acknowledged} in ${r.reprice.seconds} s; ${Math.round(f.repriceBeyond)} commands beyond the load in the 30 s after (${share}); the whole stretch: ${Math.round(f.repriceCommands)} commands and ${kb(f.repriceBytesOut)} from Redis beyond the load | ${s.purges} (202 p50 ${s.ackP50Ms} ms) | ${s.reachP50Ms ?? "–"} / ${s.reachP99Ms ?? "–"} / ${s.reachMaxMs ?? "–"} (${s.samples - s.missed} of ${s.samples}) | ${Object.entries(
      r.herd.fetches,
    )
      .map(([k, n]) => `${k} ${n}`)
      .join(", ")} (${Object.entries(r.herd.statuses)
      .map(([k, n]) => `${k}: ${n}`)
      .join(", ")}) | ${r.location.hits} / ${r.location.matches} |`;
  });
  const largest = results.at(-1);
  const smallest = results[0];
  const lf = largest ? figures(largest) : null;
  const checks =
    largest && lf && base
      ? [
          `| Redis commands a page at ${largest.size} isolates ≤ ${TARGETS.commandsPerPageRatio} × one isolate's | ${round(lf.commandsPerPage, 3)} vs ${round(base.commandsPerPage, 3)} (${round(lf.commandsPerPage / base.commandsPerPage)}×) | ${verdict(lf.commandsPerPage <= TARGETS.commandsPerPageRatio * base.commandsPerPage)} |`,
          `| a deploy of ${largest.size}: commands of the minute after ≤ ${TARGETS.deployMinuteRatio} × a steady minute's | ${round(lf.deployRatio)}× | ${verdict(lf.deployRatio <= TARGETS.deployMinuteRatio)} |`,
          `| a new isolate reads ≤ ${kb(TARGETS.newIsolateReadBytes)} from Redis for its first page | ${kb(Math.max(...results.map((r) => figures(r).newIsolateBytes)))} (the largest of all sizes) | ${verdict(results.every((r) => figures(r).newIsolateBytes <= TARGETS.newIsolateReadBytes))} |`,
        ]
      : [];
  // The re-price's bytes: the log read once per data center, whatever the number of isolates (issue 65), against the smallest size run.
  if (largest && lf && smallest && smallest !== largest) {
    const sf = figures(smallest);
    checks.push(
      `| the Redis bytes a bulk re-price costs at ${largest.size} isolates ≤ ${TARGETS.repriceBytesRatio} × at ${smallest.size} | ${kb(lf.repriceBytesOut)} vs ${kb(sf.repriceBytesOut)} (${round(lf.repriceBytesOut / Math.max(1, sf.repriceBytesOut))}×) | ${verdict(lf.repriceBytesOut <= TARGETS.repriceBytesRatio * sf.repriceBytesOut)} |`,
    );
  }
  const breakdown = results.map(
    (r) =>
      `- **${r.size}**: ${Object.entries(r.steady.byShape)
        .slice(0, 8)
        .map(([shape, n]) => `\`${shape}\` ${round(n / Math.max(1, r.steady.pages), 3)}`)
        .join(", ")}`,
  );
  const markdown = [
    "# Fleet: what grows with the number of isolates",
    "",
    o.head,
    "",
    `For each size: that many workerd isolates sharing one location cache (as on one Cloudflare data center), real Redis behind the Upstash REST gateway, the demo origin (${100_000} products, 20 ± 2 ms); the same load in all: wrk's Zipf paced at ${options.rate} pages a second and ${options.departing} departing visitors a second, spread over the isolates. Each size starts from the same state (L2 emptied but for the known-ids filter, a new location cache), warms for ${options.warmS} s and is measured for ${options.steadyS} s. Commands are those the gateway sent (MONITOR): what Upstash bills. The known-ids filter ${o.filterBuilt ? "built" : "NOT built"}. The method: bench/fleet/README.md; the model of a fleet of thousands: \`npm run bench:fleet-model\`.`,
    "",
    "## Steady: Redis and the origin a page",
    "",
    `| isolates | pages/s | Redis commands/s | commands/page | vs 1 | ${purposes.map((p) => `${p}/page`).join(" | ")} | Redis bytes/page | origin fetches/page |`,
    `| ---: | ---: | ---: | ---: | ---: | ${purposes.map(() => "---:").join(" | ")} | ---: | ---: |`,
    ...rows,
    "",
    `The location tier in the warm-up and steady stretch, the isolates' parts summed (looked up / served / turned down: invalid, purged, unvouched): ${results
      .map((r) => {
        const v = r.location.verdicts ?? {};
        return `**${r.size}** ${v.lookups ?? "–"} / ${v.hits ?? "–"} / ${v.invalid ?? "–"}, ${v.purged ?? "–"}, ${v.unvouched ?? "–"}`;
      })
      .join("; ")}.`,
    "",
    "The commands a page by shape (the largest eight):",
    "",
    ...breakdown,
    "",
    "## A deploy (every isolate restarted at once; the location cache and Redis kept)",
    "",
    `| isolates | restart ms | commands per new isolate, first page | Redis bytes per new isolate, first page | commands/page, minute after | minute after vs steady (commands/s) | s until back to steady (windows within ${STEADY_FACTOR}×) | Redis's own count per ${DEPLOY_WINDOW_S} s after |`,
    "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ...deployRows,
    "",
    "## Fleet events",
    "",
    `Bulk re-price: 300 purges of 1,000 ids nobody reads, under the load; commands in the 30 s after beyond the steady rate. Purge storm: ${STORM.purges} price changes of warm products, ${STORM.perSecond} a second, each purged until 202; reach = ms from the 202 until an isolate shows the new price (every ${REACH.reachEvery}th purge, every isolate polled every ${REACH.pollMs} ms). Herd: ${HERD_REQUESTS} requests at once for a cold product, spread over the isolates. A cold page alone: ${COLD_PAGES.count} never-viewed products one at a time, ${COLD_PAGES.gapMs} ms apart, the load stopped (what a page costs an isolate that sees little traffic: its writes go alone).`,
    "",
    "| isolates | a cold page alone | bulk re-price | purge storm | reach p50 / p99 / max ms | herd: origin fetches per service | location hits / lookups |",
    "| ---: | --- | --- | --- | --- | --- | --- |",
    ...eventRows,
    "",
    "## Targets",
    "",
    "| target | value | verdict |",
    "| --- | --- | --- |",
    ...checks,
    "",
    `Workers' logs: unhandled errors ${o.logCounts.unhandled}, I/O ${o.logCounts.io}, cross-request ${o.logCounts.crossRequest}.`,
    "",
  ].join("\n");
  const groups = results.map((r) => `${r.size}`);
  const palette = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1"];
  const redisSvg = barChartSvg({
    title: "Redis commands a page, by purpose, against the number of isolates",
    subtitle: `same total load (${options.rate} pages/s Zipf); steady ${options.steadyS} s after a ${options.warmS}-s warm-up`,
    yLabel: "commands a page",
    groups,
    series: purposes.map((name, i) => ({ name, color: palette[i % palette.length]! })),
    values: results.map((r) => purposes.map((p) => figures(r).purposePerPage[p] ?? 0)),
    scale: "linear",
    label: (v) => String(round(v, 3)),
  });
  const costSvg = barChartSvg({
    title: "Per isolate count: steady commands a page, a deploy's minute against steady, purge reach p99 (s)",
    subtitle: "one run; ratios, not absolute times",
    yLabel: "value",
    groups,
    series: [
      { name: "commands/page (steady)", color: palette[0]! },
      { name: "deploy minute ÷ steady minute", color: palette[1]! },
      { name: "purge reach p99, s", color: palette[2]! },
    ],
    values: results.map((r) => {
      const f = figures(r);
      return [f.commandsPerPage, f.deployRatio, r.storm.reachP99Ms === null ? null : r.storm.reachP99Ms / 1000];
    }),
    scale: "linear",
    label: (v) => String(round(v, 2)),
  });
  return {
    ".md": markdown,
    "-redis.svg": redisSvg,
    "-events.svg": costSvg,
    ".json": JSON.stringify({ options, results: results.map((r) => ({ ...r, figures: figures(r) })) }, null, 2),
  };
}
