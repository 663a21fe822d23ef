// The fleet's figures from the answers of queries.ts: runs every query
// through one SQL endpoint (Analytics Engine's, or the local recorder's) and
// puts the answers together as the tables `npm run fleet` prints, and as the
// totals the soak and the tests hold against the isolates' status pages.
import { RESOURCE_NAMES, type ResourceName } from "../../src/origin/resources";
import { ANSWER_TIERS } from "../../src/observability/fleetPoints";
import {
  BREAKERS,
  FLEET_QUERIES,
  BY_ISOLATE,
  BY_LOCATION,
  HIT_RATIO_BY_RESOURCE,
  ORIGIN_BY_MINUTE,
  ORIGIN_BY_SERVICE,
  PAGES_BY_OUTCOME,
  PURGE_REACH,
  resourceColumn,
  type FleetQuery,
  type QueryWindow,
} from "./queries";

export type Row = Record<string, string | number | null>;

export interface SqlEndpoint {
  /** The SQL API's address: https://api.cloudflare.com/client/v4/accounts/<id>/analytics_engine/sql, or the recorder's. */
  url: string;
  token: string;
}

/** How long one query may take: the SQL API answers in well under a second, but a minute of data over a slow link may take more. */
const QUERY_TIMEOUT_MS = 30_000;

/** Runs one query; the rows of its FORMAT JSON answer. Errors name the query and what the endpoint said. */
export async function runQuery(endpoint: SqlEndpoint, query: FleetQuery, window: QueryWindow): Promise<Row[]> {
  const response = await fetch(endpoint.url, {
    method: "POST",
    headers: { authorization: `Bearer ${endpoint.token}`, "content-type": "text/plain" },
    body: query.sql(window),
    signal: AbortSignal.timeout(QUERY_TIMEOUT_MS),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`query "${query.name}" failed: ${response.status} ${text.slice(0, 500)}`);
  let answer: { data?: unknown };
  try {
    answer = JSON.parse(text) as { data?: unknown };
  } catch {
    throw new Error(`query "${query.name}": the answer is not JSON: ${text.slice(0, 200)}`);
  }
  if (!Array.isArray(answer.data)) throw new Error(`query "${query.name}": the answer has no data rows`);
  return answer.data as Row[];
}

/** Analytics Engine answers 64-bit sums as strings (ClickHouse's JSON); the recorder as numbers. */
export const num = (value: Row[string] | undefined): number => (value === null || value === undefined || value === "" ? 0 : Number(value));

/** Pages by how they ended: pages answered (left aside), 200, 404 (absent or filtered), 503 and of them shed, visitor gone first. */
interface PageCounts {
  pages: number;
  ok: number;
  notFound: number;
  unavailable: number;
  shed: number;
  left: number;
}

/** A row of PAGES_BY_OUTCOME (or their sum) as page counts. */
const pageCounts = (row: Row): PageCounts => ({
  pages: num(row.pages),
  ok: num(row.ok),
  notFound: num(row.not_found),
  unavailable: num(row.unavailable),
  shed: num(row.shed),
  left: num(row.left_early),
});

interface MinuteFigures extends PageCounts {
  /** Unix seconds of the minute's start. */
  minute: number;
  /** Resource answers from a cache (L1, location, L2) over all answers; null without answers. */
  hitRatio: number | null;
  /** Origin calls made (fills and refreshes), and those that failed. */
  originFetches: number;
  originErrors: number;
  /** L2 calls made by the pages' requests, per page. */
  l2CallsPerPage: number | null;
  purgeReachP99Ms: number | null;
}

export interface FleetFigures {
  sinceSeconds: number;
  totals: PageCounts & {
    stale: number;
    staleIfError: number;
    defaultedSections: number;
    /** Resource answers by tier, all resources. */
    tiers: Record<(typeof ANSWER_TIERS)[number], number>;
    hitRatio: number | null;
    originFetches: number;
    originErrors: number;
    originShed: number;
    originFetchesPerPage: number | null;
    l2CallsPerPage: number | null;
    purges: { arrivals: number; p50Ms: number | null; p99Ms: number | null; maxMs: number | null };
  };
  /** Resource answers by tier, per resource. */
  resources: Record<ResourceName, Record<(typeof ANSWER_TIERS)[number], number>>;
  minutes: MinuteFigures[];
  services: Row[];
  locations: Row[];
  isolates: Row[];
  breakers: Row[];
}

/** The weighted q-quantile of (value, weight) pairs sorted by value. */
function quantile(sorted: readonly { ms: number; weight: number }[], q: number): number | null {
  const total = sorted.reduce((sum, item) => sum + item.weight, 0);
  if (total === 0) return null;
  let seen = 0;
  for (const item of sorted) {
    seen += item.weight;
    if (seen >= q * total) return item.ms;
  }
  return sorted[sorted.length - 1]!.ms;
}

const ratio = (part: number, whole: number) => (whole > 0 ? part / whole : null);
const hits = (tiers: Record<(typeof ANSWER_TIERS)[number], number>) => tiers.l1 + tiers.location + tiers.l2;
const answers = (tiers: Record<(typeof ANSWER_TIERS)[number], number>) => ANSWER_TIERS.reduce((sum, tier) => sum + tiers[tier], 0);

/** Runs every query for the last `sinceSeconds` and puts the answers together. */
export async function fleetFigures(endpoint: SqlEndpoint, window: QueryWindow): Promise<FleetFigures> {
  const answered = new Map(await Promise.all(FLEET_QUERIES.map(async (query) => [query, await runQuery(endpoint, query, window)] as const)));
  const rows = (query: FleetQuery) => answered.get(query) ?? [];
  const [pages, tiers, origin, purges] = [rows(PAGES_BY_OUTCOME), rows(HIT_RATIO_BY_RESOURCE), rows(ORIGIN_BY_MINUTE), rows(PURGE_REACH)];
  const tierCounts = (row: Row) => Object.fromEntries(ANSWER_TIERS.map((tier) => [tier, num(row[tier])])) as Record<(typeof ANSWER_TIERS)[number], number>;
  const originByMinute = new Map(origin.map((row) => [num(row.minute), row]));
  const reachByMinute = new Map<number, { ms: number; weight: number }[]>();
  const allReach: { ms: number; weight: number }[] = [];
  for (const row of purges) {
    const arrival = { ms: num(row.ms), weight: num(row.weight) };
    allReach.push(arrival);
    const list = reachByMinute.get(num(row.minute)) ?? [];
    list.push(arrival);
    reachByMinute.set(num(row.minute), list);
  }
  allReach.sort((a, b) => a.ms - b.ms);

  const minuteSet = new Set([...pages.map((row) => num(row.minute)), ...originByMinute.keys(), ...reachByMinute.keys()]);
  const pagesByMinute = new Map(pages.map((row) => [num(row.minute), row]));
  const minutes = [...minuteSet]
    .sort((a, b) => a - b)
    .map((minute): MinuteFigures => {
      const row = pagesByMinute.get(minute) ?? {};
      const originRow = originByMinute.get(minute) ?? {};
      const reach = (reachByMinute.get(minute) ?? []).sort((a, b) => a.ms - b.ms);
      const counts = tierCounts(row);
      return {
        minute,
        ...pageCounts(row),
        hitRatio: ratio(hits(counts), answers(counts)),
        originFetches: num(originRow.fetches),
        originErrors: num(originRow.errors),
        l2CallsPerPage: ratio(num(row.l2_calls), num(row.pages)),
        purgeReachP99Ms: quantile(reach, 0.99),
      };
    });

  // Every column of the minutes' rows summed: the window's row.
  const summed: Row = {};
  for (const row of pages) for (const [column, value] of Object.entries(row)) summed[column] = num(summed[column]) + num(value);
  const totalTiers = tierCounts(summed);
  const tierRow = tiers[0] ?? {};
  const resources = Object.fromEntries(
    RESOURCE_NAMES.map((resource) => [resource, Object.fromEntries(ANSWER_TIERS.map((tier) => [tier, num(tierRow[resourceColumn(resource, tier)])]))]),
  ) as FleetFigures["resources"];
  const originFetches = origin.reduce((total, row) => total + num(row.fetches), 0);
  const totalPages = num(summed.pages);
  return {
    sinceSeconds: window.sinceSeconds,
    totals: {
      ...pageCounts(summed),
      stale: num(summed.stale),
      staleIfError: num(summed.stale_if_error),
      defaultedSections: num(summed.defaulted_sections),
      tiers: totalTiers,
      hitRatio: ratio(hits(totalTiers), answers(totalTiers)),
      originFetches,
      originErrors: origin.reduce((total, row) => total + num(row.errors), 0),
      originShed: origin.reduce((total, row) => total + num(row.shed), 0),
      originFetchesPerPage: ratio(originFetches, totalPages),
      l2CallsPerPage: ratio(num(summed.l2_calls), totalPages),
      purges: {
        arrivals: allReach.reduce((total, item) => total + item.weight, 0),
        p50Ms: quantile(allReach, 0.5),
        p99Ms: quantile(allReach, 0.99),
        maxMs: allReach.length > 0 ? allReach[allReach.length - 1]!.ms : null,
      },
    },
    resources,
    minutes,
    services: rows(ORIGIN_BY_SERVICE),
    locations: rows(BY_LOCATION),
    isolates: rows(BY_ISOLATE),
    breakers: rows(BREAKERS),
  };
}
