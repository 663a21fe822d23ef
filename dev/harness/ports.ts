// Port helpers for `npm run dev`: read a port from the environment, check that
// it is free before a server tries it, or let the OS pick one.
import { createServer } from "node:net";

/** `process.env[name]` as a TCP port, `fallback` when unset; exits with a clear message when malformed. */
export function portFromEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw.trim() === "") return fallback;
  const port = Number(raw);
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    throw new Error(`${name} must be a port number between 1 and 65535, got ${JSON.stringify(raw)}`);
  }
  return port;
}

/**
 * True when we could bind host:port a moment ago. On Linux a listener on
 * 0.0.0.0 or [::] also makes 127.0.0.1 busy, so this catches those too.
 */
export function isPortFree(port: number, host = "127.0.0.1"): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once("error", () => resolve(false));
    server.listen({ port, host }, () => server.close(() => resolve(true)));
  });
}

/** A port the OS just handed out on host (someone may still grab it before we bind it). */
export function freePort(host = "127.0.0.1"): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once("error", reject);
    server.listen({ port: 0, host }, () => {
      const address = server.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      server.close(() => (port ? resolve(port) : reject(new Error("the OS gave no port"))));
    });
  });
}

/** Fails with one message naming every busy port and who wanted it. */
export async function requireFreePorts(ports: ReadonlyArray<{ port: number; what: string; env: string }>): Promise<void> {
  const busy: string[] = [];
  for (const { port, what, env } of ports) {
    if (!(await isPortFree(port))) busy.push(`port ${port} (${what}) is already in use: stop what holds it or set ${env}`);
  }
  if (busy.length > 0) throw new Error(busy.join("\n"));
}
