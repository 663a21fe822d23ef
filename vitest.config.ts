import { readFileSync } from "node:fs";
import { defineConfig, type Plugin } from "vitest/config";

// Load *.liquid files as strings in Node, as wrangler's Text rule does in the Worker bundle.
function liquidAsText(): Plugin {
  return {
    name: "liquid-as-text",
    load(id) {
      if (!id.endsWith(".liquid")) return null;
      return `export default ${JSON.stringify(readFileSync(id, "utf8"))};`;
    },
  };
}

export default defineConfig({
  plugins: [liquidAsText()],
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/support/globalSetup.ts"],
    testTimeout: 30_000,
    hookTimeout: 120_000,
  },
});
