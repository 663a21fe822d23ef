// The load of `npm run bench:peers`: wrk with zipf.lua, the same seeded
// Zipf(1.0) draws against every system. Two kinds of phase:
//
//   saturation   closed loop: each of the connections sends its next request
//                as soon as it has read the answer (wrk -t2 -cN)
//   paced        a constant offered rate on a fixed schedule (zipf.lua's
//                delay()): the open-loop load a shop's visitors make
//
// Thread i of wrk sends to target i (mod the number of targets): the tier's
// two instances get one thread and half of the connections each.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { productId } from "../../dev/origin/catalog";
import { shuffledIndexes } from "../zipf";
import { runWrk, ZIPF_LUA, zipfEnv } from "../wrk";

/** The seeds of `npm run bench`'s zipf scenario (bench/scenarios.ts): the same hot products. */
const SHUFFLE_SEED = 42;
const THREADS = 2;
/** A request unanswered this long is a timeout, an error. */
const TIMEOUT_S = 5;
/** Paced: the schedule starts this long after wrk is started (both threads loaded), and wrk runs this much longer than it (the last answers). */
const PACED_START_MS = 1200;
const PACED_EXTRA_S = 3;

/** What zipf.lua's done() prints. */
interface WrkFigures {
  requests: number;
  durationUs: number;
  bytes: number;
  p50Us: number;
  p99Us: number;
  maxUs: number;
  meanUs: number;
  errors: { connect: number; read: number; write: number; status: number; timeout: number };
  late: number;
  lateMaxMs: number;
  sent: number;
}

/** One wrk run's figures. */
export interface Phase {
  seconds: number;
  connections: number;
  /** The offered rate (paced), or null (closed loop). */
  askedRate: number | null;
  requests: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** Answers ≥ 400 plus socket errors and timeouts. */
  errors: number;
  errorKinds: Record<string, number>;
  /** Paced: sends that left more than 1 ms after their time (no connection free), and the largest delay. */
  late: number;
  lateMaxMs: number;
  /** Paced: requests sent but neither answered nor failed when wrk stopped (PACED_EXTRA_S after the schedule's end). */
  unanswered: number;
  bytes: number;
  /** CPU seconds wrk used (null: not known, or not wrk). */
  wrkCpuS: number | null;
}

/**
 * The request sequences: a file of "rank path" lines for the catalog's Zipf
 * ranks (the rank → id mapping shuffled as `npm run bench` does), minus the
 * coldest rank, left for the herd; and one-line files for single paths.
 */
export class Workload {
  readonly indexes: Uint32Array;
  readonly zipfFile: string;
  /** The same draws restricted to the walked ranks: every page cached. */
  readonly cachedFile: string;

  constructor(
    private readonly dir: string,
    readonly catalogSize: number,
    readonly walkRanks: number,
  ) {
    this.indexes = shuffledIndexes(catalogSize, SHUFFLE_SEED);
    this.zipfFile = join(dir, "zipf-paths.txt");
    this.cachedFile = join(dir, "zipf-cached-paths.txt");
    const lines: string[] = [];
    for (let rank = 1; rank < catalogSize; rank++) lines.push(`${rank} /products/${productId(this.indexes[rank - 1]!)}\n`);
    writeFileSync(this.zipfFile, lines.join(""));
    writeFileSync(this.cachedFile, lines.slice(0, walkRanks).join(""));
  }

  /** The product pages of the walked ranks, hottest first. */
  walkPaths(): string[] {
    return Array.from({ length: Math.min(this.walkRanks, this.catalogSize - 1) }, (_, i) => `/products/${productId(this.indexes[i]!)}`);
  }

  /** The most popular product (rank 1). */
  hotId(): string {
    return productId(this.indexes[0]!);
  }

  /** The coldest rank's product: never drawn, so cold when the herd asks for it. */
  coldId(): string {
    return productId(this.indexes[this.catalogSize - 1]!);
  }

  /** A paths file that always sends `path`. */
  single(path: string): string {
    const file = join(this.dir, `single-${path.replace(/[^a-z0-9]+/gi, "_")}.txt`);
    writeFileSync(file, `1 ${path}\n`);
    return file;
  }
}

export interface PhaseSpec {
  targets: string[];
  connections: number;
  seconds: number;
  /** Requests a second in all (paced), or undefined for the closed loop. */
  rate?: number;
  paths: string;
  /** Each phase has its own seed: every system gets the same draws in the same phase. */
  seed: number;
  signal?: AbortSignal;
}

/** CLOCK_MONOTONIC in ms, the clock of zipf.lua's schedule (libuv's hrtime is CLOCK_MONOTONIC on Linux). */
const monotonicMs = () => Number(process.hrtime.bigint() / 1_000_000n);

export async function wrkPhase(spec: PhaseSpec): Promise<Phase> {
  const rate = spec.rate ?? 0;
  const { summary: f, cpuSeconds } = await runWrk<WrkFigures>({
    script: ZIPF_LUA,
    url: `${spec.targets[0]}/`,
    threads: THREADS,
    connections: spec.connections,
    seconds: rate ? spec.seconds + PACED_EXTRA_S : spec.seconds,
    timeoutS: TIMEOUT_S,
    env: {
      ...zipfEnv(spec.paths, spec.targets, spec.seed),
      ZIPF_RATE: String(rate),
      ZIPF_THREADS: String(THREADS),
      ZIPF_T0: String(monotonicMs() + PACED_START_MS),
      ZIPF_SPAN_MS: String(spec.seconds * 1000),
    },
    marker: "ZIPF",
    signal: spec.signal,
  });
  // Paced: the schedule's span (wrk's own duration holds the start and the tail).
  const seconds = rate ? spec.seconds : f.durationUs / 1e6;
  const e = f.errors;
  const errors = e.status + e.connect + e.read + e.write + e.timeout;
  const errorKinds = Object.fromEntries(
    Object.entries({ "HTTP ≥ 400": e.status, connect: e.connect, read: e.read, write: e.write, [`timeout (${TIMEOUT_S} s)`]: e.timeout }).filter(([, n]) => n > 0),
  );
  return {
    seconds: Math.round(seconds * 100) / 100,
    connections: spec.connections,
    askedRate: spec.rate ?? null,
    requests: f.requests,
    rps: Math.round(f.requests / seconds),
    p50Ms: f.p50Us / 1000,
    p99Ms: f.p99Us / 1000,
    maxMs: f.maxUs / 1000,
    errors,
    errorKinds,
    late: f.late,
    lateMaxMs: Math.round(f.lateMaxMs),
    // wrk counts an answer ≥ 400 both as a request and as an error.
    unanswered: rate ? Math.max(0, f.sent - f.requests - (errors - e.status)) : 0,
    bytes: f.bytes,
    wrkCpuS: cpuSeconds,
  };
}
