// The processes of the peers benchmark that bench/stack.ts does not start:
// Nginx and Varnish as foreground children with their own configuration files,
// pid files, logs and caches in a temporary folder. Nothing here touches
// /etc, /var or a system service; every server listens on 127.0.0.1 only.
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { captureTail, isRunning, stopChild, track } from "../../dev/harness/children";
import { waitForHealthz } from "../../dev/harness/health";
import { freePort } from "../../dev/harness/ports";

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
 * wrk itself beforehand, bench/lib/wrk.ts).
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
    throw new Error(
      `${missing.join(" and ")} not found on the PATH. Install them (Debian/Ubuntu, as root):\n\n    ${INSTALL_HINT}\n\nThe benchmark runs them as its own foreground processes with configuration in a temporary folder; no system service is started or changed.`,
    );
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

// Nginx and Varnish run in a process group of their own (`detached`), so that
// the whole group goes: a master killed alone would leave its workers listening.
// Whatever is still running when this process exits is killed (track, dev/harness/children).

/** Resolves once GET url answers 200; rejects after `ms`, or when `child` exits first. */
async function waitForHttp(url: string, child: ChildProcess, ms: number, output: () => string): Promise<void> {
  const exited = new Promise<string>((done) =>
    isRunning(child) ? child.once("exit", (code, signal) => done(`code ${code}, signal ${signal}`)) : done("before start"),
  );
  const health = await waitForHealthz(url, ms, exited, "it").catch((err: Error) => Promise.reject(new Error(`${err.message}:\n${output()}`)));
  if (!health.ok) throw new Error(`${url} answered an error: ${health.body}\n${output()}`);
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
  const output = captureTail(child);
  const errorLog = () => `${output()}\n${tail(join(dir, "nginx-error.log"))}`;
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitForHttp(`${url}/healthz`, child, START_TIMEOUT_MS, errorLog);
  } catch (err) {
    await stopChild(child, STOP_TIMEOUT_MS, true);
    throw new Error(`nginx did not start: ${(err as Error).message}`);
  }
  // SIGTERM = nginx's fast shutdown: the master stops its workers, then exits.
  return { name: "nginx", url, pid: child.pid!, config, close: () => stopChild(child, STOP_TIMEOUT_MS, true) };
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
  const output = captureTail(child);
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitForHttp(`${url}/healthz`, child, START_TIMEOUT_MS, output);
  } catch (err) {
    await stopChild(child, STOP_TIMEOUT_MS, true);
    throw new Error(`varnishd did not start: ${(err as Error).message}`);
  }
  const config = `varnishd ${args.join(" ")}\n\n${vcl}`;
  return { name: "varnish", url, pid: child.pid!, config, close: () => stopChild(child, STOP_TIMEOUT_MS, true) };
}

function tail(file: string): string {
  try {
    return readFileSync(file, "utf8").slice(-2000);
  } catch {
    return "";
  }
}
