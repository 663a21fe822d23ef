// `npm run dev` stopped as a supervisor, an IDE or `kill <pid>` stops it: one
// SIGTERM to the npm process it started, nothing to the process group. npm
// relays it to its script's process (with a shell between them, as before
// the script `exec`ed its command, the shell died of it without relaying it:
// the tier stayed up with its ports); the whole tier must stop: every process
// of the tree (node dev/run.ts, redis-server, wrangler, workerd) gone, every
// port of the stack free again. And a worker whose settings are wrong: named,
// everything stopped, exit code 1, no stack trace (issue 66: the esbuild under
// wrangler, killed with its group, made wrangler's next call to it fail with
// "write EPIPE").
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { connect } from "node:net";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { captureTail, waitForExit } from "../../dev/harness/children";
import { freePort } from "../../dev/harness/ports";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const UP_TIMEOUT_MS = 60_000;
/** What the tier has, from the SIGTERM, to be gone entirely. */
const STOP_BOUND_MS = 15_000;

interface Proc {
  pid: number;
  /** Its process group: wrangler and redis-server lead their own, where workerd joins wrangler's. */
  pgid: number;
  /** /proc/<pid>/stat's start time: tells a pid reused by another process apart. */
  start: string;
  command: string;
}

let ports: Record<"DEV_PORT" | "ORIGIN_PORT" | "GATEWAY_PORT" | "DEV_REDIS_PORT", number>;
let npm: ChildProcess;
let output: () => string;
/** The tree under npm while the tier is up. */
let tree: Proc[] = [];

beforeAll(async () => {
  ports = { DEV_PORT: 0, ORIGIN_PORT: 0, GATEWAY_PORT: 0, DEV_REDIS_PORT: 0 };
  const taken = new Set<number>();
  for (const name of Object.keys(ports) as (keyof typeof ports)[]) {
    let port = await freePort();
    while (taken.has(port)) port = await freePort();
    taken.add(port);
    ports[name] = port;
  }
  // As a supervisor starts it: same process group as us, pipes for its output.
  npm = spawn("npm", ["run", "dev"], {
    cwd: ROOT,
    env: { ...process.env, ...Object.fromEntries(Object.entries(ports).map(([k, v]) => [k, String(v)])), WRANGLER_SEND_METRICS: "false" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  output = captureTail(npm, 8000);
  try {
    await waitForHealthz(`http://127.0.0.1:${ports.DEV_PORT}/healthz`);
  } finally {
    tree = treeOf(npm.pid!); // for afterAll to clean up, even after a failed start
  }
}, UP_TIMEOUT_MS + 10_000);

afterAll(() => {
  // Whatever the test found, leave nothing behind: the tree, and the groups its detached children lead.
  if (npm && npm.exitCode === null && npm.signalCode === null) npm.kill("SIGKILL");
  const all = processes();
  const ours = all.find((proc) => proc.pid === process.pid)?.pgid;
  const kill = (target: number) => {
    try {
      process.kill(target, "SIGKILL");
    } catch {
      // gone already
    }
  };
  for (const proc of tree) {
    const leadsGroup = proc.pgid === proc.pid && proc.pgid !== ours;
    if (leadsGroup && all.some((other) => other.pgid === proc.pgid && !other.zombie)) kill(-proc.pgid);
    else if (isAlive(proc)) kill(proc.pid);
  }
});

describe("npm run dev", () => {
  it(
    "stops the whole tier, every child and every port, on a SIGTERM to the npm process",
    async () => {
      const commands = tree.map((proc) => proc.command).join("\n");
      // The tree the test watches is the real one: otherwise it proves nothing.
      expect(commands).toMatch(/redis-server/);
      expect(commands).toMatch(/workerd/);
      expect(commands).toMatch(/wrangler/);
      expect(commands).toMatch(/dev\/run\.ts/);

      const killedAt = Date.now();
      npm.kill("SIGTERM");
      expect(await waitForExit(npm, STOP_BOUND_MS), "npm did not exit").toBe(true);

      let survivors = survivorsOf(tree);
      let busy = await busyPorts();
      while ((survivors.length > 0 || busy.length > 0) && Date.now() - killedAt < STOP_BOUND_MS) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        survivors = survivorsOf(tree);
        busy = await busyPorts();
      }
      const report = `${Date.now() - killedAt} ms after the SIGTERM\n${output()}`;
      expect(survivors, report).toEqual([]);
      expect(busy, report).toEqual([]);
    },
    STOP_BOUND_MS + 5_000,
  );
});

describe("npm run dev with bad worker settings", () => {
  // wrangler dev reads the worker's settings from .dev.vars, else (with CLOUDFLARE_INCLUDE_PROCESS_ENV) from the
  // environment: this test's only when the developer keeps no .dev.vars of their own.
  it.skipIf(existsSync(join(ROOT, ".dev.vars")))(
    "names every one of them, stops what it started and exits 1, without a stack trace",
    async () => {
      const own: Record<string, string> = {};
      const taken = new Set(Object.values(ports));
      for (const name of ["DEV_PORT", "ORIGIN_PORT", "GATEWAY_PORT", "DEV_REDIS_PORT"]) {
        let port = await freePort();
        while (taken.has(port)) port = await freePort();
        taken.add(port);
        own[name] = String(port);
      }
      const bad = spawn("npm", ["run", "dev"], {
        cwd: ROOT,
        env: {
          ...process.env,
          ...own,
          WRANGLER_SEND_METRICS: "false",
          CLOUDFLARE_INCLUDE_PROCESS_ENV: "true",
          PURGE_POLL_MS: "abc",
          L2_TIMEOUT_MS: "zzz",
        },
        stdio: ["ignore", "pipe", "pipe"],
      });
      const text = captureTail(bad, 16_000);
      if (!(await waitForExit(bad, UP_TIMEOUT_MS + STOP_BOUND_MS))) {
        bad.kill("SIGTERM"); // it stops what it started
        await waitForExit(bad, STOP_BOUND_MS);
        throw new Error(`npm run dev did not exit of its bad settings:\n${text()}`);
      }
      expect(bad.exitCode, text()).toBe(1);
      expect(text()).toContain(
        "[dev] the worker cannot run: Configuration error: 2 settings are wrong: L2_TIMEOUT_MS must be a number; PURGE_POLL_MS must be a number",
      );
      expect(text().trimEnd()).toMatch(/\n\[dev\] stopped after an error$/);
      expect(text()).not.toMatch(/^\[worker\]\s+at |EPIPE|no longer running|goroutine/m);
    },
    UP_TIMEOUT_MS + 2 * STOP_BOUND_MS,
  );
});

async function waitForHealthz(url: string): Promise<void> {
  const deadline = Date.now() + UP_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (npm.exitCode !== null || npm.signalCode !== null) throw new Error(`npm run dev exited before it was up:\n${output()}`);
    try {
      if ((await fetch(url, { signal: AbortSignal.timeout(1000) })).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`${url} not up within ${UP_TIMEOUT_MS} ms:\n${output()}`);
}

/** Every process: pid, parent, group, whether a zombie (one `ps` listing). */
function processes(): { pid: number; ppid: number; pgid: number; zombie: boolean }[] {
  return execFileSync("ps", ["-e", "-o", "pid=,ppid=,pgid=,stat="], { encoding: "utf8" })
    .trim()
    .split("\n")
    .map((line) => {
      const [pid = "0", ppid = "0", pgid = "0", stat = ""] = line.trim().split(/\s+/);
      return { pid: Number(pid), ppid: Number(ppid), pgid: Number(pgid), zombie: stat.startsWith("Z") };
    });
}

/** `pid` and every process below it. */
function treeOf(pid: number): Proc[] {
  const all = processes();
  const found: Proc[] = [];
  const visit = (p: number, pgid: number) => {
    const start = startOf(p);
    if (start !== null) found.push({ pid: p, pgid, start, command: commandOf(p) });
    for (const child of all.filter((proc) => proc.ppid === p)) visit(child.pid, child.pgid);
  };
  visit(pid, all.find((proc) => proc.pid === pid)?.pgid ?? 0);
  return found;
}

/**
 * What is left of `tree`: its processes still running, and any process in a
 * group one of them leads (a workerd that wrangler started after we looked).
 * Not our own group: npm and node are in it, as in a supervisor's.
 */
function survivorsOf(tree: Proc[]): string[] {
  const all = processes();
  const ours = all.find((proc) => proc.pid === process.pid)?.pgid;
  const groups = new Set(tree.filter((proc) => proc.pgid === proc.pid && proc.pgid !== ours).map((proc) => proc.pgid));
  const left = tree.filter(isAlive).map((proc) => `${proc.pid} ${proc.command}`);
  for (const proc of all) {
    if (groups.has(proc.pgid) && !proc.zombie && !tree.some((known) => known.pid === proc.pid)) {
      left.push(`${proc.pid} ${commandOf(proc.pid)} (group ${proc.pgid})`);
    }
  }
  return left;
}

/** /proc/<pid>/stat: the start time, null when gone or a zombie (dead, not reaped yet by whoever inherited it). */
function startOf(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return fields[0] === "Z" || fields[0] === "X" ? null : (fields[19] ?? null);
  } catch {
    return null;
  }
}

function commandOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ").trim().slice(0, 120);
  } catch {
    return "?";
  }
}

function isAlive(proc: Proc): boolean {
  return startOf(proc.pid) === proc.start;
}

/** The stack's ports something still accepts connections on. */
async function busyPorts(): Promise<string[]> {
  const busy: string[] = [];
  for (const [name, port] of Object.entries(ports)) if (await accepts(port)) busy.push(`${name} ${port}`);
  return busy;
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: "127.0.0.1" });
    const done = (open: boolean) => {
      socket.destroy();
      resolve(open);
    };
    socket.setTimeout(1000, () => done(true)); // no refusal: something holds it
    socket.once("connect", () => done(true));
    socket.once("error", () => done(false));
  });
}
