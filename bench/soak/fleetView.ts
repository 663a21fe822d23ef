// The fleet view under the soak's load (issue 51): the instances' FLEET
// binding delivers to the local recorder (dev/fleet/recorder.ts); after the
// load, `npm run fleet`'s figures (dev/fleet/fleetTables.ts, the queries
// Analytics Engine would run) are held against the sum of the instances'
// status pages, figure by figure, with the default sampling of plain pages.
import { fleetFigures, type FleetFigures, type SqlEndpoint } from "../../dev/fleet/fleetTables";
import type { Status } from "../lib/probe";

/** How far the fleet's figures may be from the status pages' sums (the sampling of plain pages is the gap). */
export const FLEET_VIEW_TOLERANCE = 0.05;

export interface FleetViewCheck {
  /** figure, the fleet's value, the status pages' sum, their ratio */
  rows: [string, number, number, number | null][];
  /** Data points the recorder holds per page the fleet counted: what Analytics Engine would bill per page. */
  pointsPerPage: number | null;
  pass: boolean;
  table: string;
  figures: FleetFigures;
}

export async function checkFleetView(
  endpoint: SqlEndpoint,
  sinceSeconds: number,
  statuses: readonly (Status | null)[],
  points: number,
): Promise<FleetViewCheck> {
  const figures = await fleetFigures(endpoint, { sinceSeconds });
  const sum = (pick: (status: Status) => number) => statuses.reduce((total, status) => total + (status ? pick(status) : Number.NaN), 0);
  const tiers = figures.totals.tiers;
  const rows: FleetViewCheck["rows"] = (
    [
      ["pages", figures.totals.pages, sum((s) => s.last15m.pages)],
      ["200 pages", figures.totals.ok, sum((s) => s.last15m.outcomes.ok)],
      ["503 and 429 pages", figures.totals.unavailable, sum((s) => s.last15m.outcomes.unavailable)],
      ["answers from L1", tiers.l1, sum((s) => s.last15m.total.l1)],
      ["answers from the location tier", tiers.location, sum((s) => s.last15m.total.location ?? 0)],
      ["answers from L2", tiers.l2, sum((s) => s.last15m.total.l2)],
      ["answers from the origin", tiers.origin, sum((s) => s.last15m.total.origin)],
      ["failed answers", tiers.failed, sum((s) => s.last15m.total.failed)],
      ["origin calls", figures.totals.originFetches, sum((s) => s.last15m.originTotal.fetches)],
    ] as const
  ).map(([name, fleet, pages]) => [name, fleet, pages, pages > 0 ? fleet / pages : null]);
  // A figure of a few dozen is within the sampling's noise whatever its ratio: judged on the figures that carry weight.
  const judged = rows.filter(([, , pages]) => pages >= 1000);
  const pass = judged.length > 0 && judged.every(([, , , ratio]) => ratio !== null && Math.abs(ratio - 1) <= FLEET_VIEW_TOLERANCE);
  const fmt = (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString("en-US") : "n/a");
  const table = [
    "| figure | npm run fleet | status pages summed | ratio |",
    "| --- | ---: | ---: | ---: |",
    ...rows.map(([name, fleet, pages, ratio]) => `| ${name} | ${fmt(fleet)} | ${fmt(pages)} | ${ratio === null ? "—" : ratio.toFixed(3)} |`),
  ].join("\n");
  return { rows, pointsPerPage: figures.totals.pages > 0 ? points / figures.totals.pages : null, pass, table, figures };
}
