// The deployed bundle in workerd through Miniflare, as the integration tests
// (test/support/worker.ts) and the benchmarks (bench/stack.ts) run it: built
// as `wrangler deploy` builds it (one module, the templates compiled in), run
// with the compatibility date and flags of wrangler.toml
// (dev/compatibility.ts), and the worker's output read as lines rather than
// printed. Each caller adds what is its own: the folder, ports, the inspector,
// where the lines go.
import { execFile } from "node:child_process";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Readable } from "node:stream";
import { promisify } from "node:util";
import { Log, LogLevel, Miniflare, PLUGINS } from "miniflare";
import { FLEET_DATASET } from "../../src/observability/fleetPoints";
import { compatibilityDate, compatibilityFlags } from "../compatibility";

/**
 * The benchmarks' data center (locationServer.ts): once set, every instance
 * this process starts sends its Cache API calls to that host:port, in
 * another process, instead of Miniflare's cache in its own workerd process.
 * Miniflare has no option for it, so its cache plugin's services are
 * replaced by one external service of the name workerd is given
 * (`cacheApiOutbound`); the tests never set it.
 */
let locationAddress: string | undefined;
const miniflareCacheServices = PLUGINS.cache.getServices.bind(PLUGINS.cache);
PLUGINS.cache.getServices = (options: Parameters<typeof miniflareCacheServices>[0]) =>
  locationAddress === undefined
    ? miniflareCacheServices(options)
    : [{ name: `cache:${options.workerIndex}`, external: { address: locationAddress, http: {} } }];

/** Sends the Cache API calls of every instance started from now on to `address` (undefined: Miniflare's own again). */
export function useLocationServer(address: string | undefined): void {
  locationAddress = address;
}

/**
 * Bundles the worker exactly as `wrangler deploy` would into `outDir`. Each
 * user has a folder of its own (the tests', the benchmarks'): a test run
 * started meanwhile would otherwise rebuild the file under a running
 * benchmark, and the other way round.
 */
export async function buildBundle(outDir: string): Promise<void> {
  await promisify(execFile)("npx", ["wrangler", "deploy", "--dry-run", "--outdir", outDir], {
    env: { ...process.env, WRANGLER_SEND_METRICS: "false", NO_COLOR: "1" },
    maxBuffer: 16 * 1024 * 1024,
  });
}

export interface BundleOptions {
  /** Where buildBundle put it. */
  bundleDir: string;
  bindings: Record<string, string>;
  /** Every line the worker printed (workerd's stdout or stderr, named by `stream`) and Miniflare's own (`[miniflare] …`, no stream). */
  onLine: (line: string, stream?: "stdout" | "stderr") => void;
  /** Serve real HTTP on 127.0.0.1:port (0: one the OS picks); without it, only `mf.dispatchFetch`. */
  port?: number;
  /** A folder for the Cache API's contents: instances given the same one share a location cache, and a restarted one finds it again. */
  cachePersist?: string;
  /** workerd's own inspector (0: a free port), to read the isolate's heap. */
  inspectorPort?: number;
  /** workerd's --verbose: its report of a rejection nobody handled. */
  verbose?: boolean;
  /** false: no `Request.cf` download from workers.cloudflare.com (Miniflare's placeholder object instead). */
  cf?: false;
  /**
   * The local fleet recorder's points address (dev/fleet/recorder.ts): the
   * worker's FLEET binding then delivers its data points there, as
   * Analytics Engine would keep them. Without it FLEET is unbound.
   */
  fleetPointsUrl?: string;
  /**
   * The caller handles SIGINT and SIGTERM itself (`npm run dev` stops its
   * children in order, says so, then exits): Miniflare's exit hook, which its
   * first instance adds to both and which exits the process at once (code
   * 130 or 143) before any such stop, is taken off them as soon as the
   * instance exists. Its exit listener stays: workerd still dies with this
   * process.
   */
  callerHandlesSignals?: true;
}

const STOP_SIGNALS = ["SIGINT", "SIGTERM"] as const;

/** The module that stands in for the Analytics Engine binding (dev/fleet/recorderBinding.js). */
const RECORDER_BINDING = fileURLToPath(new URL("../fleet/recorderBinding.js", import.meta.url));

/** One instance of the bundle: its own workerd process, so its own isolate and L1; `outputEnded()` resolves once its output is read to the end. */
export async function startBundle(options: BundleOptions): Promise<{ mf: Miniflare; url: URL; outputEnded: () => Promise<unknown> }> {
  const { onLine } = options;
  const outputEnded: Promise<void>[] = [];
  const fleet = options.fleetPointsUrl;
  const listening = new Map(STOP_SIGNALS.map((signal) => [signal, new Set(process.listeners(signal))]));
  const mf = new Miniflare({
    workers: [
      {
        // Unnamed, as a single worker is: workerd names its inspector target `core:user:` (bench/stack.ts looks for it).
        modules: true,
        scriptPath: join(options.bundleDir, "index.js"),
        // As wrangler.toml says, so that the runtime behaves as it does when deployed.
        compatibilityDate,
        compatibilityFlags,
        bindings: options.bindings,
        ...(fleet ? { wrappedBindings: { FLEET: { scriptName: "fleet-recorder", bindings: { url: fleet, dataset: FLEET_DATASET } } } } : {}),
      },
      // A wrapped binding's module runs in the tier's isolate, with its compatibility date.
      ...(fleet ? [{ name: "fleet-recorder", modules: true, scriptPath: RECORDER_BINDING }] : []),
    ],
    log: new CapturingLog((line) => onLine(line)),
    ...(options.port === undefined ? {} : { host: "127.0.0.1", port: options.port }),
    ...(options.cachePersist === undefined ? {} : { cachePersist: options.cachePersist }),
    ...(options.inspectorPort === undefined ? {} : { inspectorPort: options.inspectorPort }),
    ...(options.verbose === undefined ? {} : { verbose: options.verbose }),
    ...(options.cf === undefined ? {} : { cf: options.cf }),
    handleRuntimeStdio(stdout: Readable, stderr: Readable) {
      outputEnded.push(
        readLines(stdout, (line) => onLine(line, "stdout")),
        readLines(stderr, (line) => onLine(line, "stderr")),
      );
    },
  });
  // Synchronously after the constructor that added them: no signal can reach them in between.
  if (options.callerHandlesSignals) {
    for (const signal of STOP_SIGNALS) {
      for (const listener of process.listeners(signal)) if (!listening.get(signal)!.has(listener)) process.off(signal, listener as () => void);
    }
  }
  try {
    return { mf, url: await mf.ready, outputEnded: () => Promise.all(outputEnded) };
  } catch (err) {
    await mf.dispose().catch(() => undefined);
    throw err;
  }
}

/**
 * Miniflare's own warnings and errors, one line at a time, without colours
 * (the lines end up in reports and test messages). An exception that escaped
 * the worker's fetch handler becomes a 500 that only this log reports.
 */
class CapturingLog extends Log {
  constructor(private readonly keep: (line: string) => void) {
    super(LogLevel.WARN);
  }

  protected override log(message: string): void {
    for (const line of message.replace(/\x1b\[[0-9;]*m/g, "").split("\n")) this.keep(`[miniflare] ${line}`);
  }
}

/** Splits a stream (workerd's stdout or stderr) into lines for `keep`; resolves when the stream has ended (or closed). */
function readLines(stream: Readable, keep: (line: string) => void): Promise<void> {
  let rest = "";
  stream.setEncoding("utf8");
  stream.on("data", (chunk: string) => {
    const lines = (rest + chunk).split("\n");
    rest = lines.pop() ?? "";
    for (const line of lines) keep(line);
  });
  return new Promise((resolve) => {
    const done = () => {
      if (rest) keep(rest);
      rest = "";
      resolve();
    };
    stream.once("end", done);
    stream.once("close", done);
    stream.once("error", done);
  });
}
