// Bundles the worker exactly as `wrangler deploy` would (the TSX templates
// compiled in), into a folder of its own, so that the integration tests run
// the real bundle in the real Workers runtime.
import { execFileSync } from "node:child_process";
import { resolve } from "node:path";

export const BUNDLE_DIR = resolve(".wrangler/test-bundle");

export function buildWorker(): void {
  execFileSync("npx", ["wrangler", "deploy", "--dry-run", "--outdir", BUNDLE_DIR], {
    stdio: ["ignore", "ignore", "pipe"],
    env: { ...process.env, WRANGLER_SEND_METRICS: "false", NO_COLOR: "1" },
  });
}
