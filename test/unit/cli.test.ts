// The tools the README lists, and the benchmarks bench/README.md lists, as a
// newcomer first runs them (issue 66): each takes --help (what it is, its
// options with their defaults, an example; exit code 0, nothing started), and
// a flag it does not know, or a wrong value, is one line on stderr naming it
// and pointing at --help, exit code 2, never a stack trace.
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it, type ExpectStatic } from "vitest";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/** package.json's script, the file it runs. */
const TOOLS = [
  { script: "dev", file: "dev/run.ts" },
  { script: "origin", file: "dev/origin/main.ts" },
  { script: "gateway", file: "dev/gateway/main.ts" },
  { script: "filter:rebuild", file: "dev/filter-rebuild.ts" },
  { script: "warm", file: "dev/warm.ts" },
  { script: "fleet", file: "dev/fleet/main.ts" },
];

/** The benchmarks: package.json's `bench*` scripts, the file each runs. */
const BENCHMARKS = [
  { script: "bench", file: "bench/faults/run.ts" },
  { script: "bench:peers", file: "bench/peers/run.ts" },
  { script: "bench:soak", file: "bench/soak/run.ts" },
  { script: "bench:profile", file: "bench/profile/run.ts" },
  { script: "bench:ab", file: "bench/ab/run.ts" },
  { script: "bench:chaos", file: "bench/chaos/run.ts" },
  { script: "bench:chaos-rejudge", file: "bench/chaos/rejudge.ts" },
  { script: "bench:fleet", file: "bench/fleet/run.ts" },
  { script: "bench:fleet-model", file: "bench/fleet/model.ts" },
  { script: "bench:sections", file: "bench/sections/run.ts" },
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
    // node --import tsx, as npm run dev runs its file (the tsx command runs the same loader in one more node process).
    execFile(process.execPath, ["--import", "tsx", file, ...args], { cwd: ROOT, env }, (error, stdout, stderr) => {
      resolve({ code: error ? ((error as { code?: number }).code ?? null) : 0, stdout, stderr });
    });
  });
}

/** `--help`: the usage on stdout, exit code 0, and nothing else (no server started, nothing logged). */
async function expectUsage(expect: ExpectStatic, script: string, file: string): Promise<void> {
  const { code, stdout, stderr } = await run(file, ["--help"]);
  expect({ code, stderr }).toEqual({ code: 0, stderr: "" });
  expect(stdout).toContain(`npm run ${script}: `);
  expect(stdout).toMatch(/usage: /);
  expect(stdout).toMatch(/-h, --help/);
  expect(stdout.slice(stdout.search(/^examples?\b/m))).toContain(`npm run ${script}`);
}

/** A flag the tool does not know: one line naming it on stderr, exit code 2. */
async function expectUnknownFlagRefused(expect: ExpectStatic, script: string, file: string): Promise<void> {
  const { code, stdout, stderr } = await run(file, ["--frobnicate"]);
  expect(code).toBe(2);
  expect(stdout).toBe("");
  expect(stderr.trim()).toBe(`npm run ${script}: unknown option --frobnicate (see npm run ${script} -- --help)`);
}

describe.each(TOOLS)("npm run $script", ({ script, file }) => {
  it("-- --help prints what it is, its options and an example, and exits 0", async () => expectUsage(expect, script, file));

  it("refuses a flag it does not know in one line naming it, exit code 2", async () => expectUnknownFlagRefused(expect, script, file));
});

describe("the benchmarks checked here", () => {
  it("are package.json's bench scripts, each with the file it runs", () => {
    const scripts = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { scripts: Record<string, string> }).scripts;
    const benchmarks = Object.entries(scripts)
      .filter(([script]) => /^bench(:|$)/.test(script))
      .map(([script, command]) => ({ script, file: command.replace(/^tsx /, "") }));
    const byScript = (a: { script: string }, b: { script: string }) => a.script.localeCompare(b.script);
    expect([...BENCHMARKS].sort(byScript)).toEqual(benchmarks.sort(byScript));
  });
});

// Side by side: each is a node process loading a benchmark's modules (Miniflare's among them), and stops at its command line.
describe.concurrent.each(BENCHMARKS)("npm run $script", ({ script, file }) => {
  it("-- --help prints what it measures, its options and an example, and exits 0", async ({ expect }) => expectUsage(expect, script, file));

  it("refuses a flag it does not know in one line naming it, exit code 2", async ({ expect }) => expectUnknownFlagRefused(expect, script, file));
});

describe.concurrent("a benchmark's wrong value", () => {
  // A number that is none, two flags that do not go together, a file that is not there: how each line starts.
  it.for([
    { file: "bench/profile/run.ts", args: ["--seconds", "abc"], stderr: 'npm run bench:profile: --seconds must be a whole number from 1, got "abc"' },
    {
      file: "bench/soak/run.ts",
      args: ["--flood", "both", "--departing", "8"],
      stderr: "npm run bench:soak: --departing does not go with --flood (the departing flood is its own)",
    },
    {
      file: "bench/fleet/model.ts",
      args: ["--from", "bench/results/none.json"],
      stderr: "npm run bench:fleet-model: --from bench/results/none.json cannot be read (ENOENT",
    },
  ])("$file $args: one line naming it, exit code 2", async ({ file, args, stderr: expected }, { expect }) => {
    const { code, stdout, stderr } = await run(file, args);
    expect({ code, stdout }).toEqual({ code: 2, stdout: "" });
    expect(stderr.trim().split("\n")).toHaveLength(1);
    expect(stderr.slice(0, expected.length)).toBe(expected);
    expect(stderr.trim()).toMatch(/ \(see npm run bench:[a-z-]+ -- --help\)$/);
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
