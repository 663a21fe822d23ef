// bench:chaos's schedule: faults drawn from one seed (mulberry32), so that
// `--seed N` replays the same run. A warm-up without faults, then faults one
// after another with quiet gaps, a quarter of them starting while another is
// active (when they touch different parts: Redis, the origin, the fleet);
// the bulk re-price overlaps nothing and comes after a quiet spell (a longer
// one after Redis lost its data, so that the rate it is measured against is
// the load's own, not L2 refilling). Some
// faults carry a herd for a cold product. Times are whole seconds from the
// start of the load; with fewer than 10 minutes every span but the
// smallest shrinks in proportion, so that a short run still sees several kinds.
// Every third fault, from the first, is a purge-through-redis: a purge the shop's
// backend retries through a short Redis fault (a pause, a kill, a gateway
// past the log's budget, or two pauses around a core service down), each
// variant in turn.
// The run cuts wrk into segments at every boundary the schedule has (a
// fault's start, steps, end, and the end of the settling after it).
import { mulberry32 } from "../../dev/harness/random";
import { PAGE_RESOURCES, RESOURCES } from "../../src/origin/resources";
import { HERD_RANK_COUNT } from "./plan";

const KINDS = [
  "redis-pause",
  "redis-restart-empty",
  "redis-slow",
  "gateway-down",
  "origin-failing",
  "origin-hang",
  "origin-slow",
  "bulk-reprice",
  "deploy",
  "redis-then-origin",
] as const;
type FaultKind = (typeof KINDS)[number] | "purge-through-redis";
/** One fault in this many is a purge-through-redis: the first, and every this many after it. */
const PURGE_THROUGH_EVERY = 3;
/** The Redis faults a purge-through-redis retries its purge through, drawn in turn (a shuffled cycle). */
const THROUGH = ["pause", "kill", "slow", "double"] as const;
/** purge-through-redis "slow": the gateway's added latency, past a purge-log read's and a purge's budget (backgroundCallMs, 1 s). */
const THROUGH_SLOW_MS = 1200;
/** purge-through-redis "double": a core service down this long once Redis is back, and Redis paused again this long after it came back. */
const DOUBLE = { coreDownS: 4, againAfterS: 6 } as const;

/** An origin service a fault may hit, or all of them. */
export type Service = (typeof PAGE_RESOURCES)[number] | "all";
/** The core services (a page without them is a 503). */
const CORE = PAGE_RESOURCES.filter((name) => RESOURCES[name].defaults.core);

export type FaultSpec =
  | { kind: "redis-pause" | "gateway-down" | "bulk-reprice" | "deploy" }
  | { kind: "redis-restart-empty"; downS: number }
  | { kind: "redis-slow"; ms: number }
  | { kind: "origin-failing"; service: Service; errorRate: number }
  | { kind: "origin-hang"; service: Service }
  | { kind: "origin-slow"; service: Service; latencyMs: number }
  | { kind: "redis-then-origin"; redis: "pause" | "kill"; service: Service; errorRate: number | "hang" }
  | PurgeThrough;

/**
 * A purge the shop's backend retries through a Redis fault: at the start a
 * hot product's price changed and purged at once, Redis out for `outS` (paused;
 * killed, then restarted empty; or the gateway `ms` slow); "double": then
 * `service` down (every request fails) for DOUBLE.coreDownS from Redis's
 * return, and Redis paused again for `againS`, DOUBLE.againAfterS after it
 * came back (a second purge retried through that pause).
 */
export type PurgeThrough =
  | { kind: "purge-through-redis"; redis: "pause" | "kill"; outS: number }
  | { kind: "purge-through-redis"; redis: "slow"; outS: number; ms: number }
  | { kind: "purge-through-redis"; redis: "double"; outS: number; service: Service; againS: number };

export interface Fault {
  /** 1-based, in order of start. */
  n: number;
  atS: number;
  durationS: number;
  spec: FaultSpec;
  /** When a herd for a cold product is sent (s from the load's start), or null. */
  herdAtS: number | null;
}

/** The spans of a run, shrunk in proportion below 10 minutes (`scale`). */
export function spans(minutes: number) {
  const scale = Math.min(1, minutes / 10);
  return {
    scale,
    totalS: minutes * 60,
    warmupS: Math.round(60 * scale),
    gapS: [Math.max(3, Math.round(10 * scale)), Math.max(6, Math.round(40 * scale))] as const,
    durationS: [5, Math.max(8, Math.round(40 * scale))] as const,
    /** A quiet stretch starts this long after the last fault ended (before, "settling"). */
    settleS: Math.max(5, Math.round(15 * scale)),
    /** The bulk re-price: quiet before it (its "before"), time allowed for the re-price, the window after it. */
    bulk: {
      beforeS: Math.max(10, Math.round(30 * scale)),
      /** ...and this long after Redis lost its data: until L2 is full again, Redis's command rate is not the load's own. */
      afterLossS: Math.max(30, Math.round(120 * scale)),
      allowS: 15,
      afterS: Math.max(20, Math.round(60 * scale)),
    },
  };
}
export type Spans = ReturnType<typeof spans>;

/** The parts a fault touches: two faults overlap only when they touch different parts; a bulk re-price touches all. */
function parts(spec: FaultSpec): string[] {
  if (spec.kind === "bulk-reprice") return ["redis", "origin", "fleet"];
  if (spec.kind === "deploy") return ["fleet"];
  if (spec.kind === "redis-then-origin" || (spec.kind === "purge-through-redis" && spec.redis === "double")) return ["redis", "origin"];
  return spec.kind.startsWith("origin-") ? ["origin"] : ["redis"];
}

/**
 * When a fault's steps come, s after its start, in order: Redis restarted
 * (redis-restart-empty); the origin fault after Redis's (redis-then-origin);
 * Redis back (purge-through-redis), and for a "double" the core service
 * back, Redis paused again, and back again.
 */
function stepOffsets(spec: FaultSpec): number[] {
  if (spec.kind === "redis-restart-empty") return [spec.downS];
  if (spec.kind === "redis-then-origin") return [1];
  if (spec.kind !== "purge-through-redis") return [];
  if (spec.redis !== "double") return [spec.outS];
  const again = spec.outS + DOUBLE.againAfterS;
  return [spec.outS, spec.outS + DOUBLE.coreDownS, again, again + spec.againS];
}

/** Whether a fault empties Redis (a kill restarts it empty). */
function losesData(spec: FaultSpec): boolean {
  return spec.kind === "redis-restart-empty" || ((spec.kind === "redis-then-origin" || spec.kind === "purge-through-redis") && spec.redis === "kill");
}

/** The seeded schedule of a run of `minutes`. */
export function drawSchedule(seed: number, minutes: number): Fault[] {
  const random = mulberry32(seed);
  const span = spans(minutes);
  const between = (lo: number, hi: number) => lo + Math.floor(random() * (hi - lo + 1));
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
  const rate = () => Math.round((0.3 + random() * 0.7) * 20) / 20;
  const services: readonly Service[] = [...PAGE_RESOURCES, "all"];
  const faults: Fault[] = [];
  const shuffled = <T>(items: readonly T[]): T[] => {
    const out = [...items];
    for (let i = out.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [out[i], out[j]] = [out[j]!, out[i]!];
    }
    return out;
  };
  // The other kinds from a shuffled bag (each once before any comes again); every PURGE_THROUGH_EVERY-th fault
  // placed, from the first, is a purge-through-redis (one that did not fit lets the bag's next kind try first).
  let bag: FaultKind[] = [];
  let through: (typeof THROUGH)[number][] = [];
  let throughMissed = false;
  const nextKind = (): FaultKind => {
    const placed = faults.filter((f) => f.spec.kind === "purge-through-redis").length;
    if (!throughMissed && placed * PURGE_THROUGH_EVERY <= faults.length) return "purge-through-redis";
    throughMissed = false;
    if (bag.length === 0) bag = shuffled(KINDS);
    return bag.pop()!;
  };
  const nextThrough = () => {
    if (through.length === 0) through = shuffled(THROUGH);
    return through.pop()!;
  };
  const draw = (kind: FaultKind): { spec: FaultSpec; durationS: number } => {
    const durationS = between(...span.durationS);
    switch (kind) {
      case "redis-restart-empty":
        return { spec: { kind, downS: Math.min(durationS - 1, between(2, 6)) }, durationS };
      case "redis-slow":
        // Mostly within the tier's L2 budget (100 ms), sometimes well past it.
        return { spec: { kind, ms: random() < 0.6 ? between(20, 80) : between(150, 400) }, durationS };
      case "origin-failing":
        return { spec: { kind, service: pick(services), errorRate: rate() }, durationS };
      case "origin-hang":
        return { spec: { kind, service: pick(services) }, durationS };
      case "origin-slow":
        return { spec: { kind, service: pick(services), latencyMs: between(6, 40) * 50 }, durationS };
      case "redis-then-origin":
        return { spec: { kind, redis: pick(["pause", "kill"] as const), service: pick(CORE), errorRate: random() < 0.5 ? "hang" : rate() }, durationS };
      case "bulk-reprice":
        return { spec: { kind }, durationS: span.bulk.allowS + span.bulk.afterS };
      case "purge-through-redis": {
        // Short outages: what is judged is the moment Redis comes back. The window goes on a few seconds after the last.
        const redis = nextThrough();
        const outS = between(2, 4);
        const spec: PurgeThrough =
          redis === "double"
            ? { kind, redis, outS, service: pick(CORE), againS: between(2, 3) }
            : redis === "slow"
              ? { kind, redis, outS, ms: THROUGH_SLOW_MS }
              : { kind, redis, outS };
        return { spec, durationS: (stepOffsets(spec).at(-1) ?? outS) + between(4, 8) };
      }
      default:
        return { spec: { kind }, durationS };
    }
  };

  const lastEnd = () => Math.max(span.warmupS, ...faults.map((f) => f.atS + f.durationS));
  const lastLossEnd = () => Math.max(0, ...faults.filter((f) => losesData(f.spec)).map((f) => f.atS + f.durationS));
  const limit = span.totalS - span.settleS - 5;
  for (let misses = 0; misses < KINDS.length + 1; ) {
    const kind = nextKind();
    const { spec, durationS } = draw(kind);
    const previous = faults.at(-1);
    let atS: number;
    if (previous && spec.kind !== "bulk-reprice" && random() < 0.25) {
      // Starts while the previous one is active, if it touches other parts than every fault it would overlap.
      atS = previous.atS + 1 + Math.floor(random() * Math.max(1, previous.durationS - 2));
      const clash = faults.some((f) => f.atS < atS + durationS && atS < f.atS + f.durationS && parts(f.spec).some((part) => parts(spec).includes(part)));
      if (clash) atS = lastEnd() + between(...span.gapS);
    } else {
      atS = (faults.length ? lastEnd() : span.warmupS) + (faults.length ? between(...span.gapS) : 0);
      if (spec.kind === "bulk-reprice") atS = Math.max(atS, lastEnd() + span.bulk.beforeS, lastLossEnd() + span.bulk.afterLossS);
    }
    // A bulk re-price's window must hold no other fault, nor its quiet spell before.
    const bulkClash = faults.some((f) => f.spec.kind === "bulk-reprice" && atS < f.atS + f.durationS + 1);
    if (atS + durationS > limit || bulkClash) {
      misses++;
      throughMissed = spec.kind === "purge-through-redis";
      continue;
    }
    misses = 0;
    faults.push({ n: 0, atS, durationS, spec, herdAtS: null });
  }
  faults.sort((a, b) => a.atS - b.atS);
  let herds = 0;
  for (const [i, fault] of faults.entries()) {
    fault.n = i + 1;
    // A herd during about a third of the faults (never the bulk re-price's: it measures alone).
    if (fault.spec.kind !== "bulk-reprice" && herds < HERD_RANK_COUNT && random() < 0.35) {
      const first = fault.spec.kind === "redis-then-origin" ? 2 : 1;
      fault.herdAtS = fault.atS + Math.min(fault.durationS - 1, Math.max(first, Math.round(fault.durationS / 3)));
      herds++;
    }
  }
  return faults;
}

/** A fault's kind and parameters, in a few words. */
export function describe(spec: FaultSpec): string {
  switch (spec.kind) {
    case "redis-restart-empty":
      return `${spec.kind} (down ${spec.downS} s)`;
    case "redis-slow":
      return `${spec.kind} +${spec.ms} ms`;
    case "origin-failing":
      return `${spec.kind} ${spec.service} ${spec.errorRate}`;
    case "origin-hang":
      return `${spec.kind} ${spec.service}`;
    case "origin-slow":
      return `${spec.kind} ${spec.service} ${spec.latencyMs} ms`;
    case "redis-then-origin":
      return `${spec.kind} (redis ${spec.redis}, then ${spec.service} ${spec.errorRate === "hang" ? "hangs" : `fails ${spec.errorRate}`})`;
    case "purge-through-redis":
      if (spec.redis === "slow") return `${spec.kind} (redis slow +${spec.ms} ms for ${spec.outS} s)`;
      if (spec.redis === "double")
        return `${spec.kind} (redis double: paused ${spec.outS} s, then ${spec.service} down ${DOUBLE.coreDownS} s, paused again ${spec.againS} s)`;
      return `${spec.kind} (redis ${spec.redis === "kill" ? "killed, down" : "paused"} ${spec.outS} s)`;
    default:
      return spec.kind;
  }
}

/** The schedule as a Markdown table. */
export function scheduleTable(faults: readonly Fault[]): string {
  const rows = faults.map((f) => `| ${f.n} | ${f.atS} | ${describe(f.spec)} | ${f.durationS} | ${f.herdAtS === null ? "" : `at ${f.herdAtS} s`} |`);
  return ["| # | at s | fault | s | herd |", "| ---: | ---: | --- | ---: | --- |", ...rows].join("\n");
}

/** What happens at a boundary: a fault starts, takes its `k`th step (0-based, stepOffsets: Redis restarted; the origin fault after Redis's; ...), or ends. */
export interface Step {
  atS: number;
  fault: Fault;
  what: "start" | "step" | "end";
  k: number;
}

export function steps(faults: readonly Fault[]): Step[] {
  const all: Step[] = [];
  for (const fault of faults) {
    all.push({ atS: fault.atS, fault, what: "start", k: 0 });
    for (const [k, offset] of stepOffsets(fault.spec).entries()) all.push({ atS: fault.atS + offset, fault, what: "step", k });
    all.push({ atS: fault.atS + fault.durationS, fault, what: "end", k: 0 });
  }
  // Ends first at one time, so that a fault ending as another starts is undone before.
  const order = { end: 0, step: 1, start: 2 };
  return all.sort((a, b) => a.atS - b.atS || order[a.what] - order[b.what]);
}

/** A wrk segment: between two boundaries; `state` as at its start. */
export interface Segment {
  startS: number;
  endS: number;
  state: "fault" | "settling" | "quiet";
  /** The faults active in it (by the schedule). */
  active: Fault[];
}

/** The segments of a run: cut at every step, at the end of each settling, and at the warm-up's end. */
export function segments(faults: readonly Fault[], span: Spans): Segment[] {
  const cuts = new Set<number>([0, span.warmupS, span.totalS]);
  for (const step of steps(faults)) cuts.add(step.atS);
  for (const f of faults) cuts.add(f.atS + f.durationS + span.settleS);
  const sorted = [...cuts].filter((s) => s >= 0 && s <= span.totalS).sort((a, b) => a - b);
  return sorted.slice(0, -1).map((startS, i) => {
    const active = faults.filter((f) => f.atS <= startS && startS < f.atS + f.durationS);
    const ended = faults.filter((f) => f.atS + f.durationS <= startS).map((f) => f.atS + f.durationS);
    const state = active.length ? "fault" : ended.length && startS < Math.max(...ended) + span.settleS ? "settling" : "quiet";
    return { startS, endS: sorted[i + 1]!, state, active };
  });
}
