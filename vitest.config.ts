import { defineConfig } from "vitest/config";

/**
 * Files whose checks are bounds in wall-clock time (a purge's reach within
 * PURGE_POLL_MS, say): they run after the others, one at a time, so that no
 * other test file's CPU shares the machine with them and their bounds are the
 * tier's, not the test run's. The rest run side by side (`maxWorkers`): most of
 * their time is waiting on workerd, Redis and timers.
 */
const ALONE = [
  "test/integration/purge-bulk.test.ts",
  // Admission reads how late the isolate runs, which other files' CPU makes it (a slow origin's 24 first views held
  // past 2.5 s), and bounds its answers in wall time (a client past its share answered within 1 s).
  "test/integration/overload.test.ts",
];

// TSX (templates/) is compiled by vite's esbuild with tsconfig.json's jsx settings, as wrangler compiles it for the Worker.
export default defineConfig({
  test: {
    globalSetup: ["test/support/globalSetup.ts"],
    testTimeout: 30_000,
    hookTimeout: 120_000,
    maxWorkers: 2,
    minWorkers: 1,
    projects: [
      { extends: true, test: { name: "side by side", include: ["test/**/*.test.ts"], exclude: ALONE, sequence: { groupOrder: 0 } } },
      {
        extends: true,
        test: { name: "alone", include: ALONE, sequence: { groupOrder: 1 }, poolOptions: { forks: { singleFork: true } } },
      },
    ],
  },
});
