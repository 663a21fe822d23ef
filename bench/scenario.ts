// What a benchmark scenario is: the settings and context it runs with, and
// the result it reports. Types only, shared by scenarios.ts, steady.ts and
// measure.ts (which would otherwise import each other in a circle).
import type { Live, TallySummary } from "./load";
import type { Servers, WorkerInstance } from "./stack";

export interface Settings {
  quick: boolean;
  /** Connections (sockets, requests in flight) of the throughput scenarios. */
  connections: number;
  /** Worker settings given with --var (empty: the tier's defaults). */
  vars: Record<string, string>;
  catalogSize: number;
  originLatencyMs: number;
  originJitterMs: number;
}

export interface Context {
  servers: Servers;
  settings: Settings;
  signal: AbortSignal;
  live: Live;
  /** Tells the progress line what is happening; `ms` is the phase's expected length, when known. */
  phase(label: string, ms?: number): void;
  /**
   * Fresh Miniflare instances, closed when the scenario ends. `bindings` are
   * added to (and override) the run's own: the `shards` scenario's
   * UPSTASH_REDIS_SHARDS.
   */
  startWorkers(count: number, bindings?: Record<string, string>): Promise<WorkerInstance[]>;
}

export interface ScenarioResult {
  name: string;
  description: string;
  /** Connections, or a description of the concurrency ("4 × 100 at once"). */
  concurrency: string;
  load: TallySummary;
  /** Origin requests per service during the measured phases. */
  origin: Record<string, number>;
  /** Calls that reached Redis during the measured phases, by command (INFO commandstats). */
  redis: Record<string, number>;
  /** L2 round trips of the worker (MGET, EVALSHA, EVAL) per request. */
  l2CallsPerRequest: number | null;
  /** /healthz of each instance after the run: the L2 circuit breaker's state. */
  l2Breaker: string[];
  /** Breaker states seen by polling /healthz of each instance every 250 ms during the measured phases. */
  l2BreakerPolls: Record<string, number>;
  /** CPU cores kept busy during the measured phases, by role (see stack.ts cpuSnapshot). */
  cores: Record<string, number>;
  /** The same requests one at a time (1 connection), after the measured phase: service time without queueing. */
  unloaded: { requests: number; rps: number; p50: number; p99: number; productTier: Record<string, number> } | null;
  /** Scenario-specific figures. */
  extra: Record<string, unknown>;
  notes: string[];
  /** Lines the worker (or Miniflare about it) logged during the scenario. */
  workerLogLines?: number;
}

export interface Scenario {
  name: string;
  description: string;
  run(ctx: Context): Promise<ScenarioResult>;
}
