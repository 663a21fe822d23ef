// The tools the README lists, as a newcomer first runs them (issue 66): each
// takes --help (what it is, its options with their defaults, an example; exit
// code 0), and a flag it does not know is one line on stderr naming it and
// pointing at --help, exit code 2, never a stack trace.
import { execFile } from "node:child_process";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const TSX = join(ROOT, "node_modules", ".bin", "tsx");

/** package.json's script, the file it runs. */
const TOOLS = [
  { script: "dev", file: "dev/run.ts" },
  { script: "origin", file: "dev/origin/main.ts" },
  { script: "gateway", file: "dev/gateway/main.ts" },
  { script: "filter:rebuild", file: "dev/filter-rebuild.ts" },
  { script: "warm", file: "dev/warm.ts" },
  { script: "fleet", file: "dev/fleet/main.ts" },
];

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function run(file: string, args: string[], settings: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve) => {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      // A bad setting of npm run dev's: a dev/run.ts that does not read its command line stops at it at once
      // (exit code 1) instead of starting the whole stack. The others read no such setting.
      DEV_ISOLATES: "0",
      NO_COLOR: "1",
      ...settings,
    };
    execFile(TSX, [file, ...args], { cwd: ROOT, env }, (error, stdout, stderr) => {
      resolve({ code: error ? ((error as { code?: number }).code ?? null) : 0, stdout, stderr });
    });
  });
}

describe.each(TOOLS)("npm run $script", ({ script, file }) => {
  it("-- --help prints what it is, its options and an example, and exits 0", async () => {
    const { code, stdout, stderr } = await run(file, ["--help"]);
    expect({ code, stderr }).toEqual({ code: 0, stderr: "" });
    expect(stdout).toContain(`npm run ${script}: `);
    expect(stdout).toMatch(/usage: /);
    expect(stdout).toMatch(/-h, --help/);
    expect(stdout.slice(stdout.search(/^examples?\b/m))).toContain(`npm run ${script}`);
  });

  it("refuses a flag it does not know in one line naming it, exit code 2", async () => {
    const { code, stdout, stderr } = await run(file, ["--frobnicate"]);
    expect(code).toBe(2);
    expect(stdout).toBe("");
    expect(stderr.trim()).toBe(`npm run ${script}: unknown option --frobnicate (see npm run ${script} -- --help)`);
  });
});

describe("a flag's missing value, a stray argument", () => {
  it("are one line each, naming it, exit code 2", async () => {
    const missing = await run("dev/warm.ts", ["--top"]);
    expect({ code: missing.code, stderr: missing.stderr.trim() }).toEqual({
      code: 2,
      stderr: "npm run warm: --top needs a value (see npm run warm -- --help)",
    });
    const stray = await run("dev/origin/main.ts", ["8788"]);
    expect({ code: stray.code, stderr: stray.stderr.trim() }).toEqual({
      code: 2,
      stderr: 'npm run origin: unexpected argument "8788": it takes options only (see npm run origin -- --help)',
    });
    const notANumber = await run("dev/warm.ts", ["--top", "lots"]);
    expect({ code: notANumber.code, stderr: notANumber.stderr.trim() }).toEqual({
      code: 2,
      stderr: 'npm run warm: --top must be a whole number from 1, got "lots" (see npm run warm -- --help)',
    });
  });
});

describe("npm run dev with bad settings", () => {
  it("names every one of them at once, in the worker's words, and exits 1 having started nothing", async () => {
    const { code, stdout, stderr } = await run("dev/run.ts", [], { DEV_PORT: "abc", CATALOG_SIZE: "0", DEV_ISOLATES: "9" });
    expect(code).toBe(1);
    expect(stdout).toBe("");
    expect(stderr.trim()).toBe(
      '[dev] Configuration error: 3 settings are wrong: DEV_PORT must be a port number between 1 and 65535, got "abc"; DEV_ISOLATES must be a whole number from 1 to 8, got "9"; CATALOG_SIZE must be from 1 to 1000000, got 0 (npm run dev -- --help lists its settings)',
    );
  });
});
