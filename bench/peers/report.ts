// What `npm run bench:peers` writes: bench/results/peers.md (its sections from
// reportRun.ts, reportLoad.ts, reportRedis.ts and reportFaults.ts), two SVG
// charts (charts.ts) and peers.json, the run's figures, from which
// `--report-from` writes the report again. The method is bench/peers/README.md.
import { readFileSync } from "node:fs";
import { writeResults } from "../lib/report";
import { charts } from "./charts";
import type { PeersReport } from "./figures";
import { cpuAndErrors, faults } from "./reportFaults";
import { fixedLoad, freshness, saturation, targetList } from "./reportLoad";
import { costPerMillionPages, redisCommands } from "./reportRedis";
import { runHead, setup } from "./reportRun";

function markdown(report: PeersReport, images: { latency: string; origin: string }): string {
  return [
    ...runHead(report),
    ...saturation(report),
    ...fixedLoad(report),
    ...targetList(report, images.latency),
    ...freshness(report, images.origin),
    ...redisCommands(report),
    ...costPerMillionPages(report),
    ...faults(report),
    ...cpuAndErrors(report),
    ...setup(report),
  ].join("\n");
}

export function writePeersReport(report: PeersReport): { written: string[]; summary: string } {
  const { latency, origin } = charts(report);
  const text = markdown(report, { latency: "peers-latency.svg", origin: "peers-origin.svg" });
  const written = writeResults("peers", { ".md": `${text}\n`, "-latency.svg": latency, "-origin.svg": origin, ".json": JSON.stringify(report, null, 2) });
  // stdout: from the generator to the cost, without the charts and the configurations.
  const summary = text
    .slice(
      text.indexOf("**Generator ceiling**") >= 0 ? text.indexOf("**Generator ceiling**") : text.indexOf("**Neighbours**"),
      text.indexOf("## Faults and the cold herd") > 0 ? text.indexOf("## Faults and the cold herd") : text.indexOf("## Where the CPU went"),
    )
    .replace(/^!\[.*\n/gm, "");
  return { written, summary };
}

/** A run's figures as a past run wrote them (peers.json). */
export function readPeersReport(file: string): PeersReport {
  return JSON.parse(readFileSync(file, "utf8")) as PeersReport;
}
