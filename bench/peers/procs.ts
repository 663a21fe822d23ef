// The processes of the peers benchmark that bench/stack.ts does not start:
// a demo origin per peer system (forked child, see origin-child.ts), Nginx
// and Varnish as foreground children with their own configuration files,
// pid files, logs and caches in a temporary folder. Nothing here touches
// /etc, /var or a system service; every server listens on 127.0.0.1 only.
import { execFile, fork, spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { readProcesses } from "../stack";
import { freePort } from "../../test/support/ports";
import type { OriginChildMessage, OriginChildOptions } from "./origin-child";

const execFileAsync = promisify(execFile);

const INSTALL_HINT = "apt-get update && apt-get install -y nginx varnish";

const START_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 8_000;

// ---------------------------------------------------------------- tools

export interface ToolVersions {
  nginx: string;
  varnish: string;
  wrk: string | null;
}

/**
 * `nginx -v`, `varnishd -V` (both print to stderr) and `wrk -v`. Throws with
 * the install command when nginx or varnishd is missing (run.ts installs
 * wrk itself beforehand, bench/wrk.ts).
 */
export async function checkTools(): Promise<ToolVersions> {
  const version = async (bin: string, args: string[]): Promise<string | null> => {
    try {
      const { stdout, stderr } = await execFileAsync(bin, args, { timeout: 10_000 });
      return `${stdout}${stderr}`.trim().split("\n")[0]!.trim();
    } catch (err) {
      const { stdout, stderr, code } = err as { stdout?: string; stderr?: string; code?: unknown };
      // wrk -v exits with 1 after printing its version
      if (code !== "ENOENT" && `${stdout ?? ""}${stderr ?? ""}`.trim()) return `${stdout ?? ""}${stderr ?? ""}`.trim().split("\n")[0]!.trim();
      return null;
    }
  };
  const [nginx, varnish, wrk] = await Promise.all([version("nginx", ["-v"]), version("varnishd", ["-V"]), version("wrk", ["-v"])]);
  const missing = [nginx ? null : "nginx", varnish ? null : "varnishd (package varnish)"].filter(Boolean);
  if (missing.length) {
    throw new Error(`${missing.join(" and ")} not found on the PATH. Install them (Debian/Ubuntu, as root):\n\n    ${INSTALL_HINT}\n\nThe benchmark runs them as its own foreground processes with configuration in a temporary folder; no system service is started or changed.`);
  }
  return {
    nginx: nginx!.replace(/^nginx version:\s*/, ""),
    varnish: /varnish-[\d.]+/.exec(varnish!)?.[0] ?? varnish!,
    wrk: wrk ? (/wrk\s+(\S+)/.exec(wrk)?.[1] ?? wrk) : null,
  };
}

// ---------------------------------------------------------------- temp folder

export function makeTempDir(): string {
  return mkdtempSync(join(tmpdir(), "bench-peers-"));
}

export function removeTempDir(dir: string): void {
  try {
    rmSync(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 });
  } catch {
    // best effort: a folder under /tmp
  }
}

// ---------------------------------------------------------------- children

/**
 * Children still running, killed (SIGKILL) if this process exits without
 * stopping them (an error, or Miniflare's own SIGINT hook calling
 * process.exit). Nginx and Varnish run in a process group of their own
 * (`detached`), so that the whole group goes: a master killed alone would
 * leave its workers listening.
 */
const running = new Map<ChildProcess, boolean>();
process.once("exit", () => {
  const groups: number[] = [];
  for (const [child, group] of running) {
    try {
      if (group && child.pid) {
        process.kill(-child.pid, "SIGKILL");
        groups.push(child.pid);
      } else child.kill("SIGKILL");
    } catch {
      // already gone
    }
  }
  // Exit handlers cannot await: wait here (at most 1 s) until the killed
  // groups are gone, so that they stop writing into the temp folder before
  // it is removed (run.ts's exit handler, registered after this one).
  const nap = new Int32Array(new SharedArrayBuffer(4));
  const deadline = Date.now() + 1000;
  while (groups.length && livingInGroups(groups) && Date.now() < deadline) Atomics.wait(nap, 0, 0, 20);
});

/** Whether any process of these process groups is still running (zombies do not count). */
function livingInGroups(groups: number[]): boolean {
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      // fields[0] = state, fields[2] = process group
      if (fields[0] !== "Z" && groups.includes(Number(fields[2]))) return true;
    } catch {
      // gone meanwhile
    }
  }
  return false;
}

function track(child: ChildProcess, group = false): void {
  running.set(child, group);
  child.once("exit", () => running.delete(child));
}

function isRunning(child: ChildProcess): boolean {
  return child.exitCode === null && child.signalCode === null;
}

/** SIGTERM (or `signal`), then SIGKILL (its whole group for `group`) if it lingers; resolves once it is gone. */
async function stopChild(child: ChildProcess, signal: NodeJS.Signals = "SIGTERM", group = false): Promise<void> {
  if (!isRunning(child)) return;
  const exited = new Promise<void>((done) => child.once("exit", () => done()));
  child.kill(signal);
  const timer = setTimeout(() => {
    try {
      if (group && child.pid) process.kill(-child.pid, "SIGKILL");
      else child.kill("SIGKILL");
    } catch {
      // gone meanwhile
    }
  }, STOP_TIMEOUT_MS);
  await exited;
  clearTimeout(timer);
}

/** Keeps the last few KB of a child's output, for error messages. */
function captureOutput(child: ChildProcess): () => string {
  let text = "";
  const keep = (chunk: Buffer) => void (text = (text + chunk.toString("utf8")).slice(-4000));
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  return () => text;
}

/** Resolves once GET url answers `expect`, rejects after `ms` or when `child` exits. */
async function waitForHttp(url: string, child: ChildProcess, ms: number, output: () => string, expect = 200): Promise<void> {
  const deadline = Date.now() + ms;
  let last = "";
  while (Date.now() < deadline) {
    if (!isRunning(child)) throw new Error(`exited (code ${child.exitCode}, signal ${child.signalCode}) before answering ${url}:\n${output()}`);
    try {
      const response = await fetch(url, { signal: AbortSignal.timeout(2000) });
      await response.body?.cancel();
      if (response.status === expect) return;
      last = `HTTP ${response.status}`;
    } catch (err) {
      last = (err as Error).message;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`no answer ${expect} from ${url} within ${ms / 1000} s (last: ${last}):\n${output()}`);
}

// ---------------------------------------------------------------- demo origin of a peer

export interface OriginCounters {
  total: number;
  services: Record<string, number>;
}

/** The demo origin's admin API (dev/origin/index.ts), wherever the origin runs. */
export class OriginAdmin {
  constructor(readonly url: string) {}

  private async call(path: string, method = "GET", body?: unknown): Promise<any> {
    const response = await fetch(this.url + path, {
      method,
      headers: body === undefined ? {} : { "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(10_000),
    });
    if (!response.ok) throw new Error(`origin admin ${method} ${path}: HTTP ${response.status} ${await response.text()}`);
    return response.json();
  }

  async counters(): Promise<OriginCounters> {
    const body = await this.call("/__admin/counters");
    return { total: body.total, services: body.services };
  }

  /** Requests each service received for one product since the last reset, by service. */
  async countsOf(id: string): Promise<Record<string, number>> {
    const body = (await this.call("/__admin/counters")) as { ids?: Record<string, number> };
    const counts: Record<string, number> = {};
    for (const [key, count] of Object.entries(body.ids ?? {})) {
      const [service, of] = key.split(":");
      if (of === id) counts[service!] = count;
    }
    return counts;
  }

  async resetCounters(): Promise<void> {
    await this.call("/__admin/counters/reset", "POST");
  }

  /** `{service: "all", latencyMs, down}` as the admin API takes it. */
  async setFaults(fault: { latencyMs?: number; down?: "refuse" | "500" | "hang" | false; errorRate?: number }): Promise<void> {
    await this.call("/__admin/faults", "PUT", { service: "all", latencyMs: 0, errorRate: 0, down: false, ...fault });
  }

  async clearFaults(): Promise<void> {
    await this.call("/__admin/faults", "DELETE");
  }

  /** Changes a product's price (minor units); the origin bumps its version. */
  async changePrice(id: string, price: number): Promise<{ purge: unknown }> {
    return this.call(`/__admin/products/${id}`, "POST", { price });
  }
}

export interface PeerOrigin {
  url: string;
  pid: number;
  admin: OriginAdmin;
  close(): Promise<void>;
}

export async function startPeerOrigin(options: OriginChildOptions): Promise<PeerOrigin> {
  const child = fork(fileURLToPath(new URL("./origin-child.ts", import.meta.url)), [], {
    execArgv: ["--import", "tsx"],
    env: { ...process.env, PEERS_ORIGIN_OPTIONS: JSON.stringify(options) },
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  track(child);
  let url: string;
  try {
    url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("the demo origin did not start in time")), START_TIMEOUT_MS);
      child.on("message", (message: OriginChildMessage) => {
        clearTimeout(timer);
        if (message.type === "ready") resolve(message.originUrl);
        else reject(new Error(`the demo origin did not start: ${message.message}`));
      });
      child.once("exit", (code) => reject(new Error(`the demo origin exited (code ${code})`)));
    });
  } catch (err) {
    await stopChild(child);
    throw err;
  }
  return { url, pid: child.pid!, admin: new OriginAdmin(url), close: () => stopChild(child) };
}

// ---------------------------------------------------------------- Nginx

export interface CacheServer {
  name: string;
  url: string;
  /** The master / manager process: its process tree is the server's CPU. */
  pid: number;
  /** The configuration written, for the report. */
  config: string;
  close(): Promise<void>;
}

export interface CachePolicy {
  /** Fresh for (s): the tier's product ttl. */
  ttlS: number;
  /** Served stale while refreshing for (s): the tier's product swr. */
  graceS: number;
  /** Negative caching (s): the tier's product negativeTtl. */
  notFoundTtlS: number;
}

function nginxConfig(dir: string, port: number, upstreams: string[], policy: CachePolicy): string {
  const servers = upstreams.map((u) => `    server ${new URL(u).host};`).join("\n");
  // Workers run as root when we are root: they must write the cache in our 0700 temp folder.
  const user = process.getuid?.() === 0 ? "user root;\n" : "";
  return `# Written by bench/peers (npm run bench:peers): a throw-away Nginx, loopback only.
${user}daemon off;
master_process on;
worker_processes auto;
worker_rlimit_nofile 16384;
pid ${dir}/nginx.pid;
error_log ${dir}/nginx-error.log warn;

events {
  worker_connections 8192;
}

http {
  access_log off;
  client_body_temp_path ${dir}/nginx-client-body;
  proxy_temp_path ${dir}/nginx-proxy-temp;
  fastcgi_temp_path ${dir}/nginx-fastcgi-temp;
  uwsgi_temp_path ${dir}/nginx-uwsgi-temp;
  scgi_temp_path ${dir}/nginx-scgi-temp;
  keepalive_requests 1000000;
  keepalive_timeout 75s;

  proxy_cache_path ${dir}/nginx-cache levels=1:2 keys_zone=pages:64m max_size=2g inactive=2h use_temp_path=off;

  # The render-only workers: the same HTML the tier renders, caches off.
  upstream render {
${servers}
    keepalive 64;
  }

  server {
    listen 127.0.0.1:${port};

    location / {
      proxy_pass http://render;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      # The visitor's Host, as Varnish passes it (the page's absolute URLs come from PUBLIC_URL, not from it).
      proxy_set_header Host $http_host;
      proxy_connect_timeout 2s;
      proxy_read_timeout 10s;

      proxy_cache pages;
      # One request fills a new entry; the others wait for it (up to 5 s, the default).
      proxy_cache_lock on;
      proxy_cache_use_stale error timeout updating http_500 http_502 http_503 http_504;
      proxy_cache_background_update on;
      # The tier's product policy, whatever the upstream's Cache-Control says.
      proxy_ignore_headers Cache-Control Expires;
      proxy_cache_valid 200 ${policy.ttlS}s;
      proxy_cache_valid 404 ${policy.notFoundTtlS}s;
      add_header X-Cache $upstream_cache_status always;
    }
  }
}
`;
}

export async function startNginx(dir: string, upstreams: string[], policy: CachePolicy): Promise<CacheServer> {
  const port = await freePort();
  const config = nginxConfig(dir, port, upstreams, policy);
  const file = join(dir, "nginx.conf");
  writeFileSync(file, config);
  // -e: the error log before the configuration is read (else the compiled-in /var/log/nginx/error.log).
  const child = spawn("nginx", ["-p", `${dir}/`, "-c", file, "-e", join(dir, "nginx-error.log")], { stdio: ["ignore", "pipe", "pipe"], detached: true });
  track(child, true);
  const output = captureOutput(child);
  const errorLog = () => `${output()}\n${tail(join(dir, "nginx-error.log"))}`;
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitForHttp(`${url}/healthz`, child, START_TIMEOUT_MS, errorLog);
  } catch (err) {
    await stopChild(child, "SIGTERM", true);
    throw new Error(`nginx did not start: ${(err as Error).message}`);
  }
  // SIGTERM = nginx's fast shutdown: the master stops its workers, then exits.
  return { name: "nginx", url, pid: child.pid!, config, close: () => stopChild(child, "SIGTERM", true) };
}

// ---------------------------------------------------------------- Varnish

function varnishVcl(upstreams: string[], policy: CachePolicy): string {
  const backends = upstreams
    .map((u, i) => {
      const { hostname, port } = new URL(u);
      return `backend render${i} {\n  .host = "${hostname}";\n  .port = "${port}";\n  .connect_timeout = 2s;\n  .first_byte_timeout = 10s;\n  .between_bytes_timeout = 10s;\n}`;
    })
    .join("\n\n");
  const adds = upstreams.map((_, i) => `  render.add_backend(render${i});`).join("\n");
  return `# Written by bench/peers (npm run bench:peers): a throw-away Varnish, loopback only.
vcl 4.1;

import directors;

${backends}

acl purgers {
  "127.0.0.1";
  "::1";
}

sub vcl_init {
  # The render-only workers: the same HTML the tier renders, caches off.
  new render = directors.round_robin();
${adds}
}

sub vcl_recv {
  set req.backend_hint = render.backend();
  # The price-change scenario purges the product page right after the change.
  if (req.method == "PURGE") {
    if (client.ip !~ purgers) {
      return (synth(405, "Not allowed"));
    }
    return (purge);
  }
  if (req.method != "GET" && req.method != "HEAD") {
    return (pass);
  }
  # Default request coalescing: concurrent misses for one object wait for one fetch.
  return (hash);
}

sub vcl_backend_response {
  # A failed background refresh keeps the stale object (stale-if-error).
  if (beresp.status >= 500 && bereq.is_bgfetch) {
    return (abandon);
  }
  if (beresp.status == 200) {
    # The tier's product policy, whatever the upstream's Cache-Control says.
    set beresp.ttl = ${policy.ttlS}s;
    set beresp.grace = ${policy.graceS}s;
  } elsif (beresp.status == 404) {
    set beresp.ttl = ${policy.notFoundTtlS}s;
    set beresp.grace = 0s;
  } else {
    # Errors are not cached; a short hit-for-miss keeps waiters from being
    # serialised behind them (varnish-cache #3461).
    set beresp.ttl = 1s;
    set beresp.grace = 0s;
    set beresp.uncacheable = true;
  }
  return (deliver);
}

sub vcl_backend_error {
  if (bereq.is_bgfetch) {
    return (abandon);
  }
}

sub vcl_deliver {
  if (obj.hits > 0) {
    set resp.http.X-Cache = "HIT";
  } else {
    set resp.http.X-Cache = "MISS";
  }
}
`;
}

export async function startVarnish(dir: string, upstreams: string[], policy: CachePolicy): Promise<CacheServer> {
  const port = await freePort();
  const vcl = varnishVcl(upstreams, policy);
  const file = join(dir, "default.vcl");
  writeFileSync(file, vcl);
  const workdir = join(dir, "varnish");
  mkdirSync(workdir, { recursive: true });
  // -F foreground, -j none: no privilege separation (the temp folder is ours, 0700),
  // -T on loopback with a port the OS picks, -n: its working folder in the temp dir.
  const args = ["-F", "-j", "none", "-a", `127.0.0.1:${port}`, "-f", file, "-s", "malloc,256m", "-n", workdir, "-T", "127.0.0.1:0"];
  const child = spawn("varnishd", args, { stdio: ["ignore", "pipe", "pipe"], detached: true });
  track(child, true);
  const output = captureOutput(child);
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitForHttp(`${url}/healthz`, child, START_TIMEOUT_MS, output);
  } catch (err) {
    await stopChild(child, "SIGTERM", true);
    throw new Error(`varnishd did not start: ${(err as Error).message}`);
  }
  const config = `varnishd ${args.join(" ")}\n\n${vcl}`;
  return { name: "varnish", url, pid: child.pid!, config, close: () => stopChild(child, "SIGTERM", true) };
}

function tail(file: string): string {
  try {
    return readFileSync(file, "utf8").slice(-2000);
  } catch {
    return "";
  }
}

// ---------------------------------------------------------------- CPU by process tree

const TICKS_PER_SECOND = 100;

/** CPU seconds so far, by role, and of the whole machine. */
export interface CpuSample {
  at: number;
  seconds: Record<string, number>;
  /** Machine-wide busy CPU seconds (all cores). */
  machine: number;
}

/** The workerd processes this process has started so far (Miniflare spawns them as its children). */
export function workerdPids(): Set<number> {
  const pids = new Set<number>();
  for (const [pid, info] of readProcesses()) if (info.ppid === process.pid && info.comm === "workerd") pids.add(pid);
  return pids;
}

/**
 * CPU seconds per role. `roots` maps a role to the root pids of its process
 * trees (the system's workerd processes, its cache server, its origin);
 * each process counts under the first root found walking up its parents,
 * redis-server as "redis" wherever it is. Below this process but under no
 * root: another system's workerd (idle, or answering a
 * background poll) "other workerd", the rest "harness" (this process: the
 * orchestration, the pollers, Miniflare's controller). wrk starts and
 * exits within a phase, so /proc never shows it at a sample: its CPU comes
 * from bench/wrk.ts (scenarios.ts measure). Other sessions' processes are
 * left to "others" (cpuBetween).
 */
export function cpuSample(roots: Record<string, number[]>): CpuSample {
  const seconds: Record<string, number> = { harness: 0, "other workerd": 0 };
  for (const role of Object.keys(roots)) seconds[role] = 0;
  let machine = 0;
  try {
    const procs = readProcesses();
    const rootRole = new Map<number, string>([[process.pid, "harness"]]);
    for (const [role, pids] of Object.entries(roots)) for (const pid of pids) rootRole.set(pid, role);
    for (const [pid, info] of procs) {
      let role: string | undefined;
      for (let p: number | undefined = pid, depth = 0; p && depth < 12 && !role; p = procs.get(p)?.ppid, depth++) role = rootRole.get(p);
      if (!role) continue;
      if (info.comm === "redis-server") role = "redis";
      else if (role === "harness" && info.comm === "workerd") role = "other workerd";
      seconds[role] = (seconds[role] ?? 0) + info.ticks / TICKS_PER_SECOND;
    }
    const fields = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number);
    machine = (fields.reduce((a, b) => a + b, 0) - (fields[3] ?? 0) - (fields[4] ?? 0)) / TICKS_PER_SECOND;
  } catch {
    // not Linux
  }
  return { at: performance.now(), seconds, machine };
}

/** CPU seconds used per role between two samples, plus "others" (the rest of the machine) and the wall time. */
export function cpuBetween(a: CpuSample, b: CpuSample): { wallS: number; seconds: Record<string, number> } {
  const out: Record<string, number> = {};
  let ours = 0;
  for (const role of Object.keys(b.seconds)) {
    const used = Math.max(0, (b.seconds[role] ?? 0) - (a.seconds[role] ?? 0));
    ours += used;
    out[role] = Math.round(used * 100) / 100;
  }
  out.others = Math.round(Math.max(0, b.machine - a.machine - ours) * 100) / 100;
  return { wallS: Math.round(b.at - a.at) / 1000, seconds: out };
}

/** The pid of the redis-server started (as a grandchild) by bench/servers.ts, found through /proc. */
export function findChildPid(parentPid: number, comm: string): number | null {
  for (const [pid, info] of readProcesses()) if (info.ppid === parentPid && info.comm === comm) return pid;
  return null;
}
