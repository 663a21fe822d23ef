// One runtime instance of the worker: its own workerd process, so its own
// isolate with its own L1. Several of them stand for several isolates or
// locations sharing one L2.
//
// It runs with the deployed compatibility date and flags (read from
// wrangler.toml), and its log is kept, not printed: what the worker writes
// (the structured lines of src/shared/log.ts, and whatever workerd
// itself says about uncaught exceptions) and Miniflare's own warnings and
// errors, so that tests can assert on what the worker said. Set
// TEST_WORKER_LOGS=1 to also see the lines as they come.
import { startBundle } from "../../dev/harness/bundle";
import type { Env } from "../../src/config";
import { BUNDLE_DIR } from "./build";

export interface WorkerInstance {
  /** The instance's HTTP address, when started with `port`. */
  url: string | null;
  /**
   * The worker's log, oldest first, without colours: its stdout and stderr
   * (`[stdout] {"ts":…,"event":…}`) and Miniflare's warnings and errors
   * (`[miniflare] …`). The latest MAX_LOG_LINES lines only.
   */
  logs: string[];
  /** Lines of the log that say the worker failed (see FAULT_PATTERN), all of them up to MAX_FAULT_LINES, however long the log. */
  faults: string[];
  fetch(path: string, init?: RequestInit): Promise<Response>;
  /** Stops workerd, then waits (briefly) until its last output is read. Idempotent. */
  close(): Promise<void>;
}

const MAX_LOG_LINES = 2000;
const MAX_FAULT_LINES = 100;

/**
 * What the worker logs when a request failed in a way the tier never means
 * to: an exception that reached the app's error handler (`unhandled_error`,
 * src/app.ts), or the runtime refusing I/O that one request started and
 * another touched (docs/architecture.md#sharing-work-across-requests-in-one-isolate), which
 * workerd also reports on its own when nobody catches it.
 */
const FAULT_PATTERN = /unhandled_error|Cannot perform I\/O on behalf of a different request/;

/** Every instance started by this test file, closed or not (vitest isolates test files from each other). */
const started: WorkerInstance[] = [];

export function startedWorkers(): readonly WorkerInstance[] {
  return started;
}

/**
 * The fault lines (FAULT_PATTERN) the given workers logged, each prefixed
 * with its worker's index; [] when none did. Use as
 * `expect(logFaults(...workers)).toEqual([])`, after the workers were closed
 * (or at least some 100 ms after the last request), so that the last lines
 * have arrived.
 */
export function logFaults(...workers: readonly WorkerInstance[]): string[] {
  return workers.flatMap((worker, index) => worker.faults.map((line) => `worker ${index}: ${line}`));
}

/** Where a worker's log lines go: a bounded tail of everything, and every fault line. */
function logSink(logs: string[], faults: string[]) {
  const echo = process.env.TEST_WORKER_LOGS === "1";
  return (line: string) => {
    const text = line.replace(/\x1b\[[0-9;]*m/g, "").trimEnd();
    if (!text.trim()) return;
    if (echo) process.stderr.write(`${text}\n`);
    logs.push(text);
    if (logs.length > MAX_LOG_LINES) logs.splice(0, logs.length - MAX_LOG_LINES);
    if (FAULT_PATTERN.test(text) && faults.length < MAX_FAULT_LINES) faults.push(text);
  };
}

/** How long close() waits for workerd's last output once the process is gone. */
const OUTPUT_DRAIN_MS = 1000;

/**
 * `port`: also serve real HTTP there (for callers such as the demo origin's
 * purge notifications). `bundleDir`: another build of the worker than the
 * tests' own (a deliberately broken one, say). `cachePersist`: a folder for
 * the Cache API's contents, so that instances given the same one share a
 * location cache (as the isolates of one data center do) and a restarted
 * instance finds it again; without it each instance has its own, in memory.
 * `fleetPointsUrl`: the local fleet recorder's points address
 * (dev/fleet/recorder.ts), where the FLEET binding then delivers.
 */
export async function startWorker(
  bindings: Env,
  options: { port?: number; bundleDir?: string; cachePersist?: string; fleetPointsUrl?: string } = {},
): Promise<WorkerInstance> {
  const logs: string[] = [];
  const faults: string[] = [];
  const keep = logSink(logs, faults);
  const { mf, url, outputEnded } = await startBundle({
    bundleDir: options.bundleDir ?? BUNDLE_DIR,
    bindings: Object.fromEntries(Object.entries(bindings).filter(([, value]) => value !== undefined)) as Record<string, string>,
    // The worker's console output is workerd's stdout and stderr (one line
    // per console call, as src/shared/log.ts writes them); kept here
    // instead of being piped into the test process's output.
    onLine: (line, stream) => keep(stream ? `[${stream}] ${line}` : line),
    ...(options.port ? { port: options.port } : {}),
    ...(options.cachePersist ? { cachePersist: options.cachePersist } : {}),
    ...(options.fleetPointsUrl ? { fleetPointsUrl: options.fleetPointsUrl } : {}),
    // workerd reports a rejection nobody handled (in `waitUntil` work, say)
    // only with --verbose: `info: uncaught exception; … Error: Cannot perform
    // I/O on behalf of a different request`. Without it that would go unseen.
    verbose: true,
  });
  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      await mf.dispose();
      let timer: ReturnType<typeof setTimeout> | undefined;
      const drained = new Promise<void>((resolve) => (timer = setTimeout(resolve, OUTPUT_DRAIN_MS)));
      await Promise.race([outputEnded(), drained]);
      clearTimeout(timer);
    })());
  const instance: WorkerInstance = {
    url: options.port ? url.origin : null,
    logs,
    faults,
    async fetch(path, init) {
      const response = await mf.dispatchFetch(`http://tier.test${path}`, init as never);
      // Read the body at once, so that no connection to workerd stays half-read
      // while a test fires hundreds of requests.
      // (A 204 or 304 has no body, and a Response made with one is refused.)
      const body = response.status === 204 || response.status === 304 ? null : await response.arrayBuffer();
      return new Response(body, { status: response.status, headers: response.headers as unknown as Headers });
    },
    close,
  };
  started.push(instance);
  return instance;
}
