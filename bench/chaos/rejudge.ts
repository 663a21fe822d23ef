// `npm run bench:chaos-rejudge -- bench/results/chaos-*.json`: a saved
// bench:chaos run's freshness judged again by the oracle as it is now, with
// no stack and no load. The JSON keeps the timeline as run, every price
// change, the settings, and each stale answer (the first 1,000), not every
// answer: that is enough for freshness, since a price is judged against the
// changes and the faults alone and judging again can only excuse a saved one
// (the answers that were fresh stay fresh), not for availability (a failure
// is judged against every 200 before it), which is not judged again here.
// Each file: the saved answers are judged again, and must all come out
// stale again (the deadlines reproduce); then the verdict, saved → now.
import { readFileSync } from "node:fs";
import { parseCommandLine, usageError } from "../../dev/cli";
import { type FaultRecord, type Span, tailsOf, Timeline } from "./faults";
import { type FreshnessViolation, judgeFreshness, type ProbeRecord, type TierTimes } from "./oracle";
import type { PriceChange } from "./priceChanger";

const COMMAND = "npm run bench:chaos-rejudge";
const USAGE = `${COMMAND}: judges the freshness of saved bench:chaos runs again with the oracle as it is now (bench/chaos/README.md).

usage: ${COMMAND} -- FILE.json...
  -h, --help  this text

example: ${COMMAND} -- bench/results/chaos-A-6619.json`;

/** What a saved run holds that freshness is judged on. */
interface SavedRun {
  seed: number;
  settings: { times: TierTimes; policies: Record<string, { core: boolean; originTimeoutMs: number }>; tails?: { coreMs: number; redisMs: number } };
  timeline: Parameters<typeof current>[0][];
  priceChanges: PriceChange[];
  freshness: (Omit<FreshnessViolation, "excused"> & { excused?: string | null })[];
}

/** A fault record as saved before its Redis spans were lists and its latency a span of its own (seeds 202 and 303): as it is now. */
function current(
  r: FaultRecord | (Omit<FaultRecord, "redisOut" | "redisFault" | "slow"> & { redisOut: Span | null; redisFault: Span | null; slowMs: number }),
): FaultRecord {
  if (!("slowMs" in r)) return r;
  const { slowMs, redisOut, redisFault, ...rest } = r;
  return { ...rest, redisOut: redisOut ? [redisOut] : [], redisFault: redisFault ? [redisFault] : [], slow: slowMs ? { ms: slowMs, span: r.span } : null };
}

/** A saved run's freshness, judged again: the saved stale answers, those judged stale now, and of those the violations and the excused. */
function rejudge(run: SavedRun) {
  // Runs saved before the tails were: the tails as this code computes them from the run's policies.
  const timeline = new Timeline(run.settings.tails ?? tailsOf(run.settings.policies));
  timeline.records.push(...run.timeline.map(current));
  // Each saved stale answer as the prober recorded it (times rounded to the ms as saved).
  const records: ProbeRecord[] = run.freshness.map((v) => ({
    inst: v.inst,
    id: v.id,
    hot: true,
    sent: v.sent,
    answered: v.sent,
    status: 200,
    price: v.shown,
    cacheStatus: v.cacheStatus,
    serverTiming: "",
  }));
  const now = judgeFreshness(records, run.priceChanges, timeline, run.settings.times);
  const violations = now.filter((v) => v.excused === null);
  return {
    saved: run.freshness.length,
    capped: run.freshness.length >= 1000,
    stale: now.length,
    violations: violations.length,
    excused: now.length - violations.length,
  };
}

function main(): void {
  const { positionals } = parseCommandLine(COMMAND, USAGE, { options: { help: { type: "boolean", short: "h", default: false } }, allowPositionals: true });
  if (positionals.length === 0) usageError(COMMAND, "no file given");
  console.log("| file | seed | saved stale answers: verdict | judged again: violations / excused (verdict) | all saved ones stale again |");
  console.log("| --- | ---: | --- | --- | --- |");
  for (const file of positionals) {
    // Spans still open when saved were written as null (JSON has no Infinity).
    const run = JSON.parse(readFileSync(file, "utf8"), (key, value) => (key === "end" && value === null ? Number.POSITIVE_INFINITY : value)) as SavedRun;
    const r = rejudge(run);
    const verdict = (n: number) => (n === 0 ? "PASS" : "**FAIL**");
    console.log(
      `| ${file} | ${run.seed} | ${r.saved}${r.capped ? " (the first 1,000 only)" : ""}: ${verdict(r.saved)} | ${r.violations} / ${r.excused} (${verdict(r.violations)}) | ${r.stale === r.saved ? "yes" : `**no**: ${r.stale} of ${r.saved}`} |`,
    );
  }
  console.log("\nAvailability is not judged again: it needs every 200 the prober got, which the JSON does not keep.");
}

main();
