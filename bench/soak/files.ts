// What bench:soak writes: bench/results/soak.md (soak-rounds.md with
// --rounds; -<suffix> with --results-suffix), its chart (.svg) and the run's
// figures (.json). The tables come filled (windowTable.ts, checks.ts, phases.ts);
// this lays them out. The method is bench/soak/README.md.
import { lineChartSvg } from "../lib/chart";
import { pricesNote, type Prices } from "../lib/cost";
import { SAMPLING_INTERVAL_US } from "../lib/cpuProfile";
import { describeMachine, writeResults } from "../lib/report";
import { toolVersions, type FilterBuild } from "../stack";
import type { GroupFigures } from "./phases";
import { CANCEL, CATALOG, ORIGIN, type SoakOptions } from "./plan";
import { tableHead, tableRow, type Window } from "./windowTable";
import type { LocationProbe } from "./restart";

export interface SoakResults {
  command: string;
  startedAt: Date;
  filter: FilterBuild;
  herd: object;
  herdLine: string;
  windows: Window[];
  /** Whether departing visitors ran beside wrk (a column of their own). */
  departing: boolean;
  slots: { slotsFreeMs: number | null; slotsKnown: boolean; slotsText: string };
  cold: object[];
  coldTable: string;
  checks: string[][];
  checksTable: string;
  probes: { label: string; probe: LocationProbe }[];
  location: { phases: GroupFigures[]; targets: string[][]; text: string };
  prices: Prices;
  profiles: { label: string; tables: string }[];
  errorLines: [string, number][];
  /** The fleet view against the status pages (fleetView.ts); null when isolates restarted (their status pages started over). */
  fleetView: { table: string; pass: boolean; pointsPerPage: number | null; rows: unknown[] } | null;
}

/** Writes the soak's files; returns their paths. */
export function writeSoakFiles(options: SoakOptions, r: SoakResults): string[] {
  const { args, mode, instances, connections, departingConnections, plan, resultsSuffix, restartAt, locationOffAt, redisRttMs } = options;
  const { command, startedAt, filter, herd, herdLine, windows, slots, cold, coldTable, checks, checksTable, probes, prices, profiles, errorLines } = r;
  const { slotsKnown, slotsFreeMs, slotsText } = slots;
  const locationText = r.location.text;
  const name = `${args.rounds ? "soak-rounds" : "soak"}${resultsSuffix}`;
  const machine = describeMachine(toolVersions());
  const title = `Soak (${mode}): ${instances} instance(s), ${connections} connections${departingConnections ? ` + ${departingConnections} departing` : ""}, ${plan.windows} × ${plan.windowS} s`;
  const subtitle = `${machine.cpu}, ${machine.cores} cores · commit ${machine.git?.commit ?? "?"} (${machine.git?.dirtyFiles ?? "?"} uncommitted files in src/, templates/) · ${startedAt.toISOString()}`;
  const markdown = [
    `# ${title}`,
    "",
    `\`${command}\` · ${subtitle} · Node ${machine.node}, workerd ${machine.versions.workerd}, miniflare ${machine.versions.miniflare}`,
    "",
    `Origin ${ORIGIN.latencyMs} ± ${ORIGIN.jitterMs} ms, ${CATALOG.toLocaleString("en-US")} products, Zipf(1.0); known-ids filter ${filter.built ? "built" : `NOT built (${filter.detail})`}.` +
      (redisRttMs ? ` Every Redis call held ${redisRttMs} ms by the gateway first (Redis in another region).` : "") +
      (plan.cancellers
        ? ` Cancellers: ${CANCEL.share * 100}% of the last window's wrk rate (at most ${CANCEL.cap}/s), each closed 1–30 ms after it was sent.`
        : " No cancellers.") +
      (departingConnections
        ? ` Departing visitors: ${departingConnections} connections spread over the instances, each a closed loop of requests for uniform products (the cold ones left out), each left (a reset) 1–30 ms after it was sent.`
        : ""),
    "",
    `${herdLine}.`,
    "",
    tableHead(r.departing),
    ...windows.map((w) => tableRow(w)),
    "",
    `![req/s and p99 per window](${name}.svg)`,
    "",
    `Origin limiter slots in use → 0 after the load: ${slotsText}.`,
    "",
    coldTable,
    "",
    checksTable,
    "",
    ...(r.fleetView
      ? [
          "## The fleet view",
          "",
          "`npm run fleet`'s figures for the instances together (the recorder, dev/fleet/recorder.ts, answering the queries Analytics Engine would), against the sum of their status pages, with the default sampling of plain pages" +
            (r.fleetView.pointsPerPage === null ? "." : `: ${r.fleetView.pointsPerPage.toFixed(3)} data points written per page.`),
          "",
          r.fleetView.table,
          "",
        ]
      : []),
    "## The location tier: phases, probes, targets",
    "",
    locationText,
    "",
    `${pricesNote(prices)} Workers CPU is workerd's process CPU per page (the runtime's own work included), as bench:peers counts it.`,
    "",
    ...profiles.flatMap(({ label, tables }) => [
      `## CPU profile of instance 1, window ending ${label} (sampling every ${SAMPLING_INTERVAL_US} µs; the profiler slows that window)`,
      "",
      tables,
      "",
    ]),
    ...(errorLines.length
      ? [
          "Worker log (errors and warnings, distinct lines):",
          "",
          ...errorLines.map(([line, count]) => `- ${count}× \`${line.slice(0, 400).replace(/`/g, "'")}\``),
          "",
        ]
      : []),
  ].join("\n");
  const raw = {
    command,
    startedAt,
    machine,
    settings: {
      mode,
      instances,
      connections,
      departing: departingConnections,
      plan: { windowS: plan.windowS, windows: plan.windows },
      origin: ORIGIN,
      catalog: CATALOG,
      cancel: CANCEL,
      restartAt,
      locationOffAt,
    },
    filter,
    herd,
    windows,
    slotsFreeMs: slotsKnown ? slotsFreeMs : "n/a",
    cold,
    checks,
    location: { restartAt, locationOffAt, probes, phases: r.location.phases, targets: r.location.targets },
    workerLog: errorLines,
    fleetView: r.fleetView ? { pass: r.fleetView.pass, pointsPerPage: r.fleetView.pointsPerPage, rows: r.fleetView.rows } : null,
  };
  return writeResults(name, { ".md": markdown, ".svg": lineChartSvg(title, subtitle, windows), ".json": JSON.stringify(raw, null, 2) });
}
