// What every benchmark's report says about where it ran, and where its files
// go: bench/results/<name>.md (and .json, .svg), overwritten by each run (the
// history of results is git's).
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { cpus, release, totalmem } from "node:os";
import { join, relative, resolve } from "node:path";

const RESULTS_DIR = resolve("bench/results");

export interface Machine {
  cpu: string;
  cores: number;
  memoryGiB: number;
  os: string;
  node: string;
  versions: Record<string, string>;
  git: { commit: string; dirtyFiles: number } | null;
}

/** The commit and work tree the worker bundle was built from (set by `recordBuild`): what the run measured. */
let builtFrom: Machine["git"] | undefined;

/** Called as the bundle is built: the report names that tree, not the one at the end of the run (src/ may be edited meanwhile). */
export function recordBuild(): void {
  builtFrom = gitState();
}

export function describeMachine(versions: Record<string, string>): Machine {
  let cpu = cpus()[0]?.model ?? "unknown";
  try {
    cpu = /^model name\s*:\s*(.+)$/m.exec(readFileSync("/proc/cpuinfo", "utf8"))?.[1] ?? cpu;
  } catch {
    // not Linux: os.cpus() has it
  }
  return {
    cpu,
    cores: cpus().length,
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    os: `${process.platform} ${release()}`,
    node: process.version,
    versions,
    git: builtFrom !== undefined ? builtFrom : gitState(),
  };
}

/** The commit measured, and whether the work tree differed from it (others edit src/ meanwhile). */
function gitState(): Machine["git"] {
  try {
    const commit = execFileSync("git", ["rev-parse", "--short", "HEAD"], { encoding: "utf8" }).trim();
    const dirty = execFileSync("git", ["status", "--porcelain", "--", "src", "templates"], { encoding: "utf8" });
    return { commit, dirtyFiles: dirty.split("\n").filter(Boolean).length };
  } catch {
    return null;
  }
}

/** One line for a report's head: the command, the machine, the commit, the time. */
export function runLine(command: string, machine: Machine, startedAt: Date): string {
  const args = process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(" ")}` : "";
  const git = machine.git ? `commit ${machine.git.commit} (${machine.git.dirtyFiles} uncommitted files in src/, templates/)` : "commit ?";
  return `\`${command}${args}\` · ${machine.cpu}, ${machine.cores} cores · ${git} · ${startedAt.toISOString()} · workerd ${machine.versions.workerd ?? "?"}`;
}

/** Writes bench/results/<name><ext> for each entry of `files` (ext → content); returns the paths written, relative to the checkout. */
export function writeResults(name: string, files: Record<string, string>): string[] {
  mkdirSync(RESULTS_DIR, { recursive: true });
  return Object.entries(files).map(([ext, content]) => {
    const file = join(RESULTS_DIR, `${name}${ext}`);
    writeFileSync(file, content);
    return relative(resolve("."), file);
  });
}
