// `wrangler dev` as a child of `npm run dev`: no keyboard, its output relayed
// with a `[worker]` prefix, and stopped together with the workerd processes it
// starts.
import { spawn } from "node:child_process";
import { join } from "node:path";
import { forEachLine, forget, isRunning, signalGroup, track, waitForExit, waitForGroupGone } from "./children";

export interface WranglerOptions {
  /** The repo root: where wrangler.toml and node_modules/.bin live. */
  root: string;
  port: number;
  /** Passed as `--var NAME:VALUE`; an empty value reaches the worker as "". */
  vars: Record<string, string>;
  print: (line: string) => void;
}

export interface Wrangler {
  pid: number;
  /** Resolves when the wrangler process has exited, with how. */
  exited: Promise<string>;
  /** SIGTERM to wrangler, then SIGKILL to its group for anything left. Idempotent. */
  stop(): Promise<void>;
}

/** Per stage of stop(): a healthy wrangler is gone in about a second. */
const STOP_TIMEOUT_MS = 3_000;
/** How wrangler exits when a SIGTERM stops it in order. */
const ORDERLY_EXITS = ["exit code 0", "killed by SIGTERM"];
/** The most lines of a stopping wrangler kept for when its stop goes wrong. */
const HELD_LINES = 200;

export function startWrangler(options: WranglerOptions): Wrangler {
  const bin = join(options.root, "node_modules", ".bin", "wrangler");
  const args = [
    "dev",
    "--port",
    String(options.port),
    "--ip",
    "127.0.0.1",
    // No hotkeys: stdin is not a terminal here, and Ctrl-C belongs to us.
    "--show-interactive-dev-session=false",
    ...Object.entries(options.vars).flatMap(([name, value]) => ["--var", `${name}:${value}`]),
  ];
  const child = spawn(bin, args, {
    cwd: options.root,
    // Own process group, so that we can kill wrangler and its workerd children
    // in one go, and so that a terminal Ctrl-C reaches us first (we stop the
    // tier in order) instead of every process at once.
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    env: {
      ...process.env,
      WRANGLER_SEND_METRICS: "false",
      // Miniflare otherwise downloads a sample `Request.cf` from
      // workers.cloudflare.com at start: ~3 s lost (twice) and a warning when
      // offline. The tier does not read request.cf; the placeholder is fine.
      CLOUDFLARE_CF_FETCH_ENABLED: process.env.CLOUDFLARE_CF_FETCH_ENABLED ?? "false",
    },
  });
  // Listening for "error" first: a spawn failure is then a message, not a crash.
  const exited = new Promise<string>((resolve) => {
    child.once("error", (err) => resolve(`could not be started: ${err.message}`));
    child.once("exit", (code, signal) => resolve(signal ? `killed by ${signal}` : `exit code ${code}`));
  });
  if (child.pid === undefined) throw new Error(`could not start ${bin}: is wrangler installed (npm ci)?`);
  const pid = child.pid;
  track(child, true);

  /**
   * While stop() stops it: what wrangler and the processes under it print as
   * they go (esbuild's report of its parent gone mid-rebuild, a goroutine
   * dump), held, and printed only if the stop did not go as it should.
   */
  let held: string[] | null = null;
  const print = (line: string) => {
    if (held === null) options.print(line);
    else if (held.push(line) > HELD_LINES) held.shift();
  };
  forEachLine(child.stdout, workerLogRelay(print));
  forEachLine(child.stderr, workerLogRelay(print));

  let stopped: Promise<void> | undefined;
  const stop = () =>
    (stopped ??= (async () => {
      // A wrangler that stopped by itself said why: nothing is held.
      if (!isRunning(child)) {
        if (!(await waitForGroupGone(pid, STOP_TIMEOUT_MS))) signalGroup(pid, "SIGKILL");
        if (await waitForGroupGone(pid, STOP_TIMEOUT_MS)) forget(child);
        return;
      }
      held = [];
      // SIGTERM to wrangler alone: it tears down what it started (workerd, its
      // esbuild services) in order. Sent to the whole group, it killed esbuild
      // under wrangler, whose next call to it then failed ("The service is no
      // longer running", "write EPIPE") with a stack trace relayed as [worker] lines.
      child.kill("SIGTERM");
      const how = (await waitForExit(child, STOP_TIMEOUT_MS)) ? await exited : `still running ${STOP_TIMEOUT_MS} ms after a SIGTERM`;
      // Whatever is left of the group (a wrangler that did not stop, a workerd it left): SIGKILL.
      const left = !(await waitForGroupGone(pid, STOP_TIMEOUT_MS));
      if (left) signalGroup(pid, "SIGKILL");
      if (await waitForGroupGone(pid, STOP_TIMEOUT_MS)) forget(child);
      const lines = held;
      held = null;
      if (left || !ORDERLY_EXITS.includes(how)) {
        for (const line of lines) options.print(line);
        options.print(`[worker] wrangler did not stop in order (${how})${left ? ": what was left of it was killed" : ""}`);
      }
    })());
  return { pid, exited, stop };
}

/**
 * Prefixes each line with `[worker]`, drops blank lines, and drops miniflare's
 * "Unable to fetch the `Request.cf` object" warning with the stack trace that
 * follows it: harmless offline, and alarming-looking.
 */
function workerLogRelay(print: (line: string) => void): (line: string) => void {
  let skippingCfWarning = false;
  return (raw) => {
    const line = raw.replace(/\x1b\[[0-9;]*m/g, ""); // match on text, not colour codes
    if (line.includes("Unable to fetch the `Request.cf` object")) {
      skippingCfWarning = true;
      return;
    }
    if (skippingCfWarning && (/^\s+at\s/.test(line) || /^\w*Error\b/.test(line.trim()))) return;
    skippingCfWarning = false;
    if (line.trim() === "") return;
    // Colours help in a terminal and are noise in a log file.
    print(`[worker] ${process.stdout.isTTY ? raw : line}`);
  };
}
