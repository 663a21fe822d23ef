// bench:chaos's faults, done and undone (schedule.ts says when): redis-server
// frozen or killed and restarted empty, the gateway slowed or unreachable
// (Servers.redisControl / gatewayControl), origin services failing, hanging
// or slow (the demo origin's admin faults, several at once combined per
// service), every isolate restarted (a deploy). What was done when is kept
// as a timeline of the times it really happened, which the oracle judges
// against: when Redis was unreachable, when any Redis fault or a core
// origin fault was on, how slow the gateway was, when the fleet restarted.
// A purge-through-redis also has the shop's backend change a price and purge
// it at the start of each of its Redis outages (`purgeNow`), the purge
// retried through the outage.
import type { OriginAdmin } from "../../dev/harness/originAdmin";
import { DEFAULTS } from "../../src/config/defaults";
import { PAGE_RESOURCES, RESOURCES } from "../../src/origin/resources";
import { ISOLATE_STALL_MS } from "../../src/shared/leases";
import type { Servers } from "../stack";
import { describe, type Fault, type FaultSpec, type PurgeThrough, type Service } from "./schedule";

export interface Span {
  start: number;
  /** Infinity while it lasts. */
  end: number;
}

/** One fault as it really happened (ms from the load's start). */
export interface FaultRecord {
  fault: Fault;
  span: Span;
  /** Redis unreachable for the purge log: paused, killed (until restarted), the gateway down, or slowed past a log read's budget (1 s); each span (a double has two). */
  redisOut: Span[];
  /** Any fault of Redis or the gateway (a slow one within the budget too), each span. */
  redisFault: Span[];
  /** A core origin service (a page without it is a 503) failing, hanging or slow. */
  coreFault: Span | null;
  /** The gateway's added latency, and while it was on (redis-slow: the fault's span), else null. */
  slow: { ms: number; span: Span } | null;
  /** The fleet's restart (deploy): from the first isolate stopped to the last one serving. */
  restart: Span | null;
  /** Redis killed, then restarted empty: every entry in L2 lost at its start. */
  lost: Span | null;
}

const overlaps = (span: Span | null, a: number, b: number) => span !== null && span.start <= b && a <= span.end;
const open = (at: number): Span => ({ start: at, end: Number.POSITIVE_INFINITY });
/** Every span a record holds. */
const spansOf = (r: FaultRecord): Span[] =>
  [r.span, ...r.redisOut, ...r.redisFault, r.coreFault, r.slow?.span ?? null, r.restart, r.lost].filter((span) => span !== null);

/**
 * What happened when: the queries the oracle asks. A fault's effect on the
 * tier outlasts its undo by its breaker's way back (`tails`): an origin
 * service's breaker stays open its cool-down, then probes once (a fetch);
 * the L2 breaker closes at its next PING.
 */
export class Timeline {
  readonly records: FaultRecord[] = [];

  constructor(private readonly tails: { coreMs: number; redisMs: number }) {}

  /** The faults on at some time in [a, b]. */
  activeDuring(a: number, b = a): FaultRecord[] {
    return this.records.filter((r) => overlaps(r.span, a, b));
  }

  /** The spans of Redis unreachable, in order of start. */
  redisOut(): Span[] {
    return this.records.flatMap((r) => r.redisOut).sort((x, y) => x.start - y.start);
  }

  /** Any Redis fault over [a, b], its tail included. */
  redisFaulted(a: number, b = a): boolean {
    return this.records.some((r) => r.redisFault.some((span) => overlaps(span, a - this.tails.redisMs, b)));
  }

  /** A core origin service faulted over [a, b], its tail included. */
  coreFaulted(a: number, b = a): boolean {
    return this.records.some((r) => overlaps(r.coreFault, a - this.tails.coreMs, b));
  }

  /**
   * The origin failing or hanging for `service` (a fault on it or on all
   * services; one only slow is not) over [a, b], its breaker's tail included.
   * Its span is the core fault's: a core service only (the price's product is one).
   */
  originFailing(service: string, a: number, b = a): boolean {
    return this.records.some((r) => {
      const set = originFault(r.fault.spec);
      const fails = set !== null && (set.down === "hang" || (set.errorRate ?? 0) > 0);
      return fails && (set.service === service || set.service === "all") && overlaps(r.coreFault, a - this.tails.coreMs, b);
    });
  }

  /** When Redis last came back empty before `t` (null: never). */
  lastLossBefore(t: number): Span | null {
    return (
      this.records
        .flatMap((r) => (r.lost && r.lost.start < t ? [r.lost] : []))
        .sort((x, y) => x.start - y.start)
        .at(-1) ?? null
    );
  }

  /** The gateway's added latency at its highest in [a, b]. */
  slowMs(a: number, b: number): number {
    return Math.max(0, ...this.records.flatMap((r) => (r.slow && overlaps(r.slow.span, a, b) ? [r.slow.ms] : [])));
  }

  /** When the fleet last finished restarting before `t` (−Infinity: never). */
  lastRestartBefore(t: number): number {
    return Math.max(Number.NEGATIVE_INFINITY, ...this.records.flatMap((r) => (r.restart && r.restart.end <= t ? [r.restart.end] : [])));
  }

  /** Closes what is still open (at the end of the run). */
  closeAll(at: number): void {
    for (const r of this.records) for (const span of spansOf(r)) if (span.end === Infinity) span.end = at;
  }
}

/**
 * How long a fault's effect outlasts its undo: an origin breaker's cool-down
 * and one probe (a fetch, the longest core time-out); the L2 breaker's next
 * PING and its budget.
 */
export function tailsOf(policies: Record<string, { core: boolean; originTimeoutMs: number }>): { coreMs: number; redisMs: number } {
  const coreTimeoutMs = Math.max(...Object.values(policies).map((p) => (p.core ? p.originTimeoutMs : 0)));
  return { coreMs: DEFAULTS.breakerCoolDownMs + coreTimeoutMs, redisMs: 2 * ISOLATE_STALL_MS };
}

/** "#3 redis-pause", for the tables. */
export const faultName = (fault: Fault) => `#${fault.n} ${describe(fault.spec)}`;

const isCore = (service: Service) => service === "all" || RESOURCES[service].defaults.core;

interface OriginFault {
  service: Service;
  latencyMs?: number;
  errorRate?: number;
  down?: "hang";
}

/** The origin fault a spec sets (for redis-then-origin, its second step's; for a purge-through-redis "double", the core service down). */
function originFault(spec: FaultSpec): OriginFault | null {
  if (spec.kind === "origin-failing") return { service: spec.service, errorRate: spec.errorRate };
  if (spec.kind === "origin-hang") return { service: spec.service, down: "hang" };
  if (spec.kind === "origin-slow") return { service: spec.service, latencyMs: spec.latencyMs };
  if (spec.kind === "redis-then-origin")
    return spec.errorRate === "hang" ? { service: spec.service, down: "hang" } : { service: spec.service, errorRate: spec.errorRate };
  if (spec.kind === "purge-through-redis" && spec.redis === "double") return { service: spec.service, errorRate: 1 };
  return null;
}

/** Whether a fault pauses redis-server (and resumes it at its end). */
const pauses = (spec: FaultSpec) => spec.kind === "redis-pause" || (spec.kind === "redis-then-origin" && spec.redis === "pause");

/**
 * Does and undoes the schedule's faults (all but the bulk re-price, which
 * run.ts runs: it is load, not a fault of a part), noting each in the
 * timeline. `restartFleet`: every isolate stopped and started again;
 * `purgeNow`: the shop's backend changes a hot product's price and purges it
 * at once, retrying through what is on (not waited for).
 */
export function faultControls(deps: {
  servers: Servers;
  origin: OriginAdmin;
  now: () => number;
  tails: { coreMs: number; redisMs: number };
  restartFleet: () => Promise<void>;
  purgeNow: (fault: Fault) => void;
}) {
  const { servers, origin, now } = deps;
  const timeline = new Timeline(deps.tails);
  const byFault = new Map<number, FaultRecord>();
  /** The origin faults on now, by fault number: several at once are combined per service. */
  const originFaults = new Map<number, OriginFault>();
  const state = { paused: false, killed: false, gatewayDown: false, latencyMs: 0 };

  async function applyOrigin(): Promise<void> {
    await Promise.all(
      PAGE_RESOURCES.map((service) => {
        const on = [...originFaults.values()].filter((f) => f.service === service || f.service === "all");
        return origin.setFaults({
          service,
          latencyMs: Math.max(0, ...on.map((f) => f.latencyMs ?? 0)),
          errorRate: Math.max(0, ...on.map((f) => f.errorRate ?? 0)),
          down: on.some((f) => f.down === "hang") ? "hang" : false,
        });
      }),
    );
  }
  const redis = async (action: "pause" | "resume" | "kill" | "restart") => {
    await servers.redisControl(action);
    state.paused = action === "pause";
    state.killed = action === "kill";
  };
  const gateway = async (down: boolean) => {
    await servers.gatewayControl({ action: down ? "down" : "up" });
    state.gatewayDown = down;
  };
  const latency = async (ms: number) => {
    await servers.gatewayControl({ action: "latency", ms });
    state.latencyMs = ms;
  };
  const setOrigin = async (fault: Fault, record: FaultRecord) => {
    const set = originFault(fault.spec)!;
    originFaults.set(fault.n, set);
    await applyOrigin();
    if (isCore(set.service)) record.coreFault = open(now());
  };
  const clearOrigin = async (fault: Fault) => {
    if (originFaults.delete(fault.n)) await applyOrigin();
  };
  const close = (span: Span | null | undefined) => span && span.end === Infinity && (span.end = now());
  /** Redis out from now (and faulted): a span of each, noted as the fault's latest. */
  const out = (record: FaultRecord) => {
    record.redisOut.push(open(now()));
    record.redisFault.push(open(now()));
  };
  const latest = (spans: Span[]) => spans.at(-1);

  /** A purge-through-redis: its Redis fault, then the price changed and purged at once (its retries run through it). */
  async function startThrough(fault: Fault, spec: PurgeThrough, record: FaultRecord): Promise<void> {
    out(record);
    if (spec.redis === "slow") {
      // As redis-slow past the purge log's budget: Redis out while the latency is on (its own span).
      record.slow = { ms: spec.ms, span: open(now()) };
      await latency(spec.ms);
    } else if (spec.redis === "kill") {
      record.lost = latest(record.redisOut)!;
      await redis("kill");
    } else await redis("pause");
    deps.purgeNow(fault);
  }
  /** Its steps (stepOffsets): Redis back; for a double, then the core service down, back, Redis paused again (a purge retried through it too), back. */
  async function stepThrough(fault: Fault, spec: PurgeThrough, record: FaultRecord, k: number): Promise<void> {
    if (k === 0 && spec.redis === "kill") {
      // As redis-restart-empty: Redis back (empty), still faulted until the fault's end.
      await redis("restart");
      close(latest(record.redisOut));
      return;
    }
    if (k === 0 && spec.redis === "slow") {
      await latency(0);
      close(record.slow?.span);
    } else if (k === 0 || k === 3) await redis("resume");
    if (k === 0 || k === 3) {
      close(latest(record.redisOut));
      close(latest(record.redisFault));
    }
    if (k === 0 && spec.redis === "double") await setOrigin(fault, record);
    if (k === 1) {
      await clearOrigin(fault);
      close(record.coreFault);
    }
    if (k === 2) {
      out(record);
      await redis("pause");
      deps.purgeNow(fault);
    }
  }

  return {
    timeline,
    async start(fault: Fault): Promise<void> {
      const record: FaultRecord = { fault, span: open(now()), redisOut: [], redisFault: [], coreFault: null, slow: null, restart: null, lost: null };
      timeline.records.push(record);
      byFault.set(fault.n, record);
      const { spec } = fault;
      switch (spec.kind) {
        case "redis-pause":
        case "redis-restart-empty":
        case "gateway-down":
        case "redis-then-origin":
          out(record);
          if (spec.kind === "gateway-down") await gateway(true);
          else if (pauses(spec)) await redis("pause");
          else {
            record.lost = latest(record.redisOut)!;
            await redis("kill");
          }
          return;
        case "redis-slow":
          record.redisFault.push(open(now()));
          record.slow = { ms: spec.ms, span: record.span };
          // The purge log is read with the background budget (invalidation/log.ts): slower than that, no isolate can read it.
          if (spec.ms >= DEFAULTS.backgroundCallMs) record.redisOut.push(open(now()));
          await latency(spec.ms);
          return;
        case "purge-through-redis":
          return startThrough(fault, spec, record);
        case "deploy":
          record.restart = open(now());
          await deps.restartFleet();
          record.restart.end = now();
          return;
        case "bulk-reprice":
          return;
        default:
          await setOrigin(fault, record);
      }
    },
    /** Its `k`th step (schedule.ts stepOffsets): Redis restarted (empty), the origin fault after Redis's, a purge-through-redis's. */
    async step(fault: Fault, k: number): Promise<void> {
      const record = byFault.get(fault.n)!;
      const { spec } = fault;
      if (spec.kind === "redis-restart-empty") {
        await redis("restart");
        close(latest(record.redisOut));
      } else if (spec.kind === "redis-then-origin") await setOrigin(fault, record);
      else if (spec.kind === "purge-through-redis") await stepThrough(fault, spec, record, k);
    },
    async end(fault: Fault): Promise<void> {
      const record = byFault.get(fault.n)!;
      const { spec } = fault;
      if (pauses(spec)) await redis("resume");
      if (spec.kind === "redis-then-origin" && spec.redis === "kill") await redis("restart");
      if (spec.kind === "gateway-down") await gateway(false);
      if (spec.kind === "redis-slow") await latency(0);
      for (const span of [...record.redisOut, ...record.redisFault]) close(span);
      await clearOrigin(fault);
      close(record.coreFault);
      close(record.slow?.span);
      close(record.span);
    },
    /** Undoes whatever is still on (the end of the run, Ctrl-C, a failure). */
    async undoAll(): Promise<void> {
      if (state.paused) await redis("resume");
      if (state.killed) await redis("restart");
      if (state.gatewayDown) await gateway(false);
      if (state.latencyMs) await latency(0);
      if (originFaults.size) {
        originFaults.clear();
        await origin.clearFaults();
      }
    },
  };
}
