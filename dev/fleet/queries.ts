// The operator's questions, as Workers Analytics Engine SQL over the tier's
// data points (src/observability/fleetPoints.ts says which column holds
// what). `npm run fleet` sends them to the SQL API (or to the local
// recorder, which answers the same text: dev/fleet/recorder.ts) and prints
// the answers; the README's "Seeing the fleet" names each by its `name`.
//
// "pages" are the pages answered to a visitor still there (as the status
// page counts them); those whose visitor left first are `left_early`.
//
// Counts are sums of `_sample_interval * double1`: Analytics Engine's own
// sampling times the tier's (one plain page in FLEET_PAGE_SAMPLE stands for
// as many). Every query is plain SELECT ... GROUP BY over one dataset, no
// joins: what two queries share (pages and origin fetches per minute) is put
// together in fleetTables.ts.
import { RESOURCE_NAMES, type ResourceName } from "../../src/origin/resources";
import { ANSWER_TIERS, BLOB, blob, DOUBLE, double, FLEET_DATASET, resourceBlob } from "../../src/observability/fleetPoints";

export interface FleetQuery {
  name: string;
  /** What it answers, as the operator would ask it. */
  question: string;
  sql: (window: QueryWindow) => string;
}

export interface QueryWindow {
  /** How far back, in seconds. */
  sinceSeconds: number;
  dataset?: string;
}

/** Pages (or events) a point stands for. */
const WEIGHT = `_sample_interval * ${double(DOUBLE.weight)}`;
const MINUTE = "intDiv(toUInt32(timestamp), 60) * 60";

const weighted = (condition: string) => `SUM(IF(${condition}, ${WEIGHT}, 0))`;
const weightedSum = (column: number) => `SUM(${WEIGHT} * ${double(column)})`;

function from(window: QueryWindow, kind: "page" | "origin" | "breaker" | "purge"): string {
  return `FROM ${window.dataset ?? FLEET_DATASET} WHERE index1 = '${kind}' AND timestamp > NOW() - INTERVAL '${Math.round(window.sinceSeconds)}' SECOND`;
}

const OUTCOME = blob(BLOB.outcome);
// Comparisons spelled with = and != only: the SQL reference documents those (no IN list is relied on).
const oneOf = (column: string, values: readonly string[]) => `(${values.map((value) => `${column} = '${value}'`).join(" OR ")})`;
const noneOf = (column: string, values: readonly string[]) => `(${values.map((value) => `${column} != '${value}'`).join(" AND ")})`;
/** Origin outcomes that are calls not made: this isolate shed them (metrics.ts counts them apart too). */
const NOT_MADE = ["overloaded", "circuit-open"];
/** Outcomes of calls made that are not the service's failures: an answer, or the tier cutting short a call nobody waited for. */
const ANSWERED = ["found", "absent", "abandoned"];

export const PAGES_BY_OUTCOME: FleetQuery = {
  name: "pages",
  question: "How many pages did the fleet serve each minute, and how did they end?",
  sql: (w) =>
    `SELECT ${MINUTE} AS minute, ${weighted(`${OUTCOME} != 'left'`)} AS pages, ${weighted(`${OUTCOME} = 'ok'`)} AS ok, ${weighted(oneOf(OUTCOME, ["absent", "filtered"]))} AS not_found, ` +
    `${weighted(`${OUTCOME} = 'unavailable'`)} AS unavailable, ${weightedSum(DOUBLE.shed)} AS shed, ${weighted(`${OUTCOME} = 'left'`)} AS left_early, ` +
    `${weightedSum(DOUBLE.defaulted)} AS defaulted_sections, ${weightedSum(DOUBLE.stale)} AS stale, ${weightedSum(DOUBLE.staleIfError)} AS stale_if_error, ` +
    `${weightedSum(DOUBLE.l2Calls)} AS l2_calls, ${weightedSum(DOUBLE.originFetches)} AS page_origin_fetches, ` +
    `${ANSWER_TIERS.map((tier) => `${weightedSum(DOUBLE[tier])} AS ${tier}`).join(", ")} ` +
    `${from(w, "page")} GROUP BY minute ORDER BY minute FORMAT JSON`,
};

/** The per-resource columns: `<resource>_<tier>`. */
export const resourceColumn = (resource: ResourceName, tier: (typeof ANSWER_TIERS)[number]) => `${resource}_${tier}`;

export const HIT_RATIO_BY_RESOURCE: FleetQuery = {
  name: "tiers",
  question: "Which tier answered each resource (the hit ratio per resource and tier)?",
  sql: (w) =>
    `SELECT ${RESOURCE_NAMES.flatMap((resource) =>
      ANSWER_TIERS.map((tier) => `${weighted(`${blob(resourceBlob(resource))} = '${tier}'`)} AS ${resourceColumn(resource, tier)}`),
    ).join(", ")} ${from(w, "page")} FORMAT JSON`,
};

export const ORIGIN_BY_MINUTE: FleetQuery = {
  name: "origin",
  question: "How many origin calls did the fleet make each minute (fills and refreshes alike), and how many failed or were shed?",
  sql: (w) =>
    `SELECT ${MINUTE} AS minute, ${weighted(noneOf(OUTCOME, NOT_MADE))} AS fetches, ` +
    `${weighted(noneOf(OUTCOME, [...NOT_MADE, ...ANSWERED]))} AS errors, ${weighted(oneOf(OUTCOME, NOT_MADE))} AS shed ` +
    `${from(w, "origin")} GROUP BY minute ORDER BY minute FORMAT JSON`,
};

export const ORIGIN_BY_SERVICE: FleetQuery = {
  name: "services",
  question: "Which services answered how (found, absent, timeout, status, overloaded, circuit-open…)?",
  sql: (w) =>
    `SELECT ${blob(BLOB.what)} AS service, ${OUTCOME} AS outcome, SUM(${WEIGHT}) AS calls ${from(w, "origin")} ` +
    `GROUP BY service, outcome ORDER BY service, calls DESC FORMAT JSON`,
};

export const BY_LOCATION: FleetQuery = {
  name: "locations",
  question: "Where were pages shed or 503, and where did visitors leave?",
  sql: (w) =>
    `SELECT ${blob(BLOB.colo)} AS colo, ${weighted(`${OUTCOME} != 'left'`)} AS pages, ${weighted(`${OUTCOME} = 'unavailable'`)} AS unavailable, ` +
    `${weightedSum(DOUBLE.shed)} AS shed, ${weighted(`${OUTCOME} = 'left'`)} AS left_early, ${weightedSum(DOUBLE.staleIfError)} AS stale_if_error ` +
    `${from(w, "page")} GROUP BY colo ORDER BY unavailable DESC, pages DESC FORMAT JSON`,
};

export const BY_ISOLATE: FleetQuery = {
  name: "isolates",
  question: "What did each isolate serve (its name is the one its status page shows)?",
  sql: (w) =>
    `SELECT ${blob(BLOB.isolate)} AS isolate, ${blob(BLOB.colo)} AS colo, ${weighted(`${OUTCOME} != 'left'`)} AS pages, ${weighted(`${OUTCOME} = 'ok'`)} AS ok, ` +
    `${weighted(`${OUTCOME} = 'unavailable'`)} AS unavailable, ${ANSWER_TIERS.map((tier) => `${weightedSum(DOUBLE[tier])} AS ${tier}`).join(", ")} ` +
    `${from(w, "page")} GROUP BY isolate, colo ORDER BY pages DESC FORMAT JSON`,
};

export const BREAKERS: FleetQuery = {
  name: "breakers",
  question: "Which breakers opened or closed, when, and in how many isolates?",
  sql: (w) =>
    `SELECT ${MINUTE} AS minute, ${blob(BLOB.what)} AS breaker, ${OUTCOME} AS state, SUM(${WEIGHT}) AS changes ` +
    `${from(w, "breaker")} GROUP BY minute, breaker, state ORDER BY minute, breaker, state FORMAT JSON`,
};

/** Raw arrivals (a purge reaches each isolate once): quantiles are taken from them in fleetTables.ts. */
export const PURGE_REACH: FleetQuery = {
  name: "purges",
  question: "How long did purges take to reach the isolates (p50, p99, the slowest)?",
  sql: (w) => `SELECT ${MINUTE} AS minute, ${double(DOUBLE.ms)} AS ms, ${WEIGHT} AS weight ${from(w, "purge")} ORDER BY minute, ms LIMIT 100000 FORMAT JSON`,
};

/** Every query `npm run fleet` runs, in the order it prints them. */
export const FLEET_QUERIES: readonly FleetQuery[] = [
  PAGES_BY_OUTCOME,
  HIT_RATIO_BY_RESOURCE,
  ORIGIN_BY_MINUTE,
  ORIGIN_BY_SERVICE,
  BY_LOCATION,
  BY_ISOLATE,
  BREAKERS,
  PURGE_REACH,
];
