// The tests' build of the worker (dev/harness/bundle.ts), in a folder of its
// own, so that the integration tests run the real bundle in the real Workers
// runtime while a benchmark runs its own.
import { resolve } from "node:path";

export const BUNDLE_DIR = resolve(".wrangler/test-bundle");
