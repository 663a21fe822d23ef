// Recording one worker's CPU profile through workerd's inspector, and
// summarising it against the deployed bundle: for bench:profile, and for
// bench:soak's `--profile-windows`.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { openInspector } from "./inspector";
import { BUNDLE_DIR, type WorkerInstance } from "../stack";
import { inclusiveMs, summarise, type CpuProfile, type Summary } from "./cpuProfileSummary";

/** µs between samples: fine enough for functions of a few µs, coarse enough not to slow the isolate much. */
export const SAMPLING_INTERVAL_US = 200;

/** Starts the V8 profiler of `worker` (started with an inspector); `stop` ends it and returns the profile, `close` drops it (on interruption). */
export async function startProfiler(worker: WorkerInstance): Promise<{ stop: () => Promise<CpuProfile>; close: () => void }> {
  const inspector = await openInspector(worker.inspector!);
  try {
    await inspector.call("Profiler.enable");
    await inspector.call("Profiler.setSamplingInterval", { interval: SAMPLING_INTERVAL_US });
    await inspector.call("Profiler.start");
  } catch (error) {
    inspector.close();
    throw error;
  }
  return {
    async stop() {
      try {
        return (await inspector.call<{ profile: CpuProfile }>("Profiler.stop", {}, 120_000)).profile;
      } finally {
        inspector.close();
      }
    },
    close: () => inspector.close(),
  };
}

/** The deployed bundle's file, and whether a profile frame's script is it (the rest is the runtime's built-ins). */
const BUNDLE_FILE = "index.js";
const isBundle = (url: string) => url.endsWith(BUNDLE_FILE);

/** The profile split by part of the request path, its functions placed by the bundle's module markers. */
export function summariseBundleProfile(profile: CpuProfile): Summary {
  return summarise(profile, readFileSync(join(BUNDLE_DIR, BUNDLE_FILE), "utf8"), isBundle, SAMPLING_INTERVAL_US);
}

/** The time of the samples with the bundle's `functionName` on the stack, ms (cpuProfileSummary.ts, inclusiveMs). */
export function bundleInclusiveMs(profile: CpuProfile, functionName: string): number {
  return inclusiveMs(profile, functionName, isBundle, SAMPLING_INTERVAL_US);
}
