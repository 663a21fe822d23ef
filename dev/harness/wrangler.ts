// `wrangler dev` as a child of `npm run dev`: no keyboard, its output relayed
// with a `[worker]` prefix, and stopped together with the workerd processes it
// starts.
import { spawn } from "node:child_process";
import { join } from "node:path";
import { forEachLine, forget, signalGroup, track, waitForExit, waitForGroupGone } from "./children";

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
  /** SIGTERM to the whole group, then SIGKILL for anything left. Idempotent. */
  stop(): Promise<void>;
}

/** Per stage of stop(): a healthy wrangler is gone in about a second. */
const STOP_TIMEOUT_MS = 3_000;

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

  forEachLine(child.stdout, workerLogRelay(options.print));
  forEachLine(child.stderr, workerLogRelay(options.print));

  let stopped: Promise<void> | undefined;
  const stop = () =>
    (stopped ??= (async () => {
      // SIGTERM reaches wrangler and workerd alike; wrangler tears down its runtime.
      if (signalGroup(pid, "SIGTERM")) {
        const calm = (await waitForExit(child, STOP_TIMEOUT_MS)) && (await waitForGroupGone(pid, STOP_TIMEOUT_MS));
        if (!calm) signalGroup(pid, "SIGKILL");
      }
      if (await waitForGroupGone(pid, STOP_TIMEOUT_MS)) forget(child);
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
