import { defineConfig } from "vitest/config";

// TSX (templates/) is compiled by vite's esbuild with tsconfig.json's jsx settings, as wrangler compiles it for the Worker.
export default defineConfig({
  test: {
    globalSetup: ["test/support/globalSetup.ts"],
    testTimeout: 30_000,
    hookTimeout: 120_000,
    // Side by side: most of a file's time is waiting on workerd, Redis and timers. No file checks a
    // wall-clock bound (benchmarks measure time), so none needs the machine to itself.
    maxWorkers: 2,
    minWorkers: 1,
  },
});
