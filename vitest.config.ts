import { defineConfig } from "vitest/config";

// TSX (templates/) is compiled by vite's esbuild with tsconfig.json's jsx settings, as wrangler compiles it for the Worker.
export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/support/globalSetup.ts"],
    testTimeout: 30_000,
    hookTimeout: 120_000,
  },
});
