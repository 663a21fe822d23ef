// What the tier's redis-server says it did: INFO commandstats and INFO stats
// before and after a phase (Redis's own count: an EVALSHA and every
// redis.call inside it are each one call), and a MONITOR census that tells
// the commands a client sent (the gateway's connection) from those a script
// ran (MONITOR marks them "lua"). dev/gateway keeps no count of its own.
import { once } from "node:events";
import { connect } from "node:net";
import { Redis } from "ioredis";

/** The harness's own commands (these readings, the MONITOR), left out of every figure. */
const HARNESS = /^(info|config\|.*|monitor|client\|.*|select|ping)$/;

export interface RedisSnapshot {
  calls: Record<string, number>;
  netInBytes: number;
  netOutBytes: number;
}

/** Commands and bytes between two snapshots. */
export interface RedisUsage {
  byCommand: Record<string, number>;
  total: number;
  /** Bytes redis-server read from its clients and wrote to them (RESP), total_net_input_bytes / total_net_output_bytes. */
  netInBytes: number;
  netOutBytes: number;
}

/** Commands seen by MONITOR: sent by a client (the gateway) or run inside a script. */
export interface Census {
  seconds: number;
  sent: Record<string, number>;
  inScripts: Record<string, number>;
  /** `sent` by command and the shape of its first key (ids and numbers as `<id>`, `<n>`): `evalsha pp:v1:p:<id>`. */
  sentByKey: Record<string, number>;
  /** Bytes MONITOR's stream carried: redis-server's output to the census itself, to leave out of its traffic. */
  bytes: number;
}

export class RedisProbe {
  private constructor(
    private readonly link: Redis,
    readonly port: number,
  ) {}

  static async connect(port: number): Promise<RedisProbe> {
    const link = new Redis({ port, host: "127.0.0.1", maxRetriesPerRequest: 1, lazyConnect: true, enableReadyCheck: false, retryStrategy: () => null });
    link.on("error", () => undefined); // failures surface through the commands' rejections
    await link.connect();
    return new RedisProbe(link, port);
  }

  async snapshot(): Promise<RedisSnapshot> {
    const [commands, stats] = [await this.link.info("commandstats"), await this.link.info("stats")];
    const calls: Record<string, number> = {};
    for (const m of commands.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) if (!HARNESS.test(m[1]!)) calls[m[1]!] = Number(m[2]);
    const stat = (name: string) => Number(new RegExp(`^${name}:(\\d+)`, "m").exec(stats)?.[1] ?? 0);
    return { calls, netInBytes: stat("total_net_input_bytes"), netOutBytes: stat("total_net_output_bytes") };
  }

  /**
   * MONITOR on a raw connection of its own while `during` runs. Not ioredis's
   * monitor(): under load the lines that follow MONITOR's "OK" in the same
   * read reach it before it has switched to monitoring, and it fails ("Command
   * queue state error", redis/ioredis#1981). Each line is a simple string:
   * `+<time> [<db> <source>] "<command>" "<arg>"…`, source "lua" inside a script.
   */
  async census(during: () => Promise<void>): Promise<Census> {
    const sent: Record<string, number> = {};
    const inScripts: Record<string, number> = {};
    const sentByKey: Record<string, number> = {};
    const socket = connect({ port: this.port, host: "127.0.0.1" });
    socket.on("error", () => undefined); // a census cut short is partial, not fatal
    await once(socket, "connect");
    let rest = "";
    let bytes = 0;
    socket.on("data", (chunk: Buffer) => {
      bytes += chunk.length;
      const lines = (rest + chunk.toString("latin1")).split("\r\n");
      rest = lines.pop() ?? "";
      for (const line of lines) {
        const match = /^\+[\d.]+ \[\d+ ([^\]]+)\] "([^"]*)"/.exec(line);
        if (!match) continue;
        const into = match[1] === "lua" ? inScripts : sent;
        const name = match[2]!.toLowerCase();
        into[name] = (into[name] ?? 0) + 1;
        if (into === sent) {
          const shape = `${name} ${keyShape(name, line)}`;
          sentByKey[shape] = (sentByKey[shape] ?? 0) + 1;
        }
      }
    });
    socket.write("MONITOR\r\n");
    const started = performance.now();
    try {
      await during();
    } finally {
      socket.destroy();
    }
    return { seconds: Math.round((performance.now() - started) / 100) / 10, sent, inScripts, sentByKey, bytes };
  }

  close(): void {
    this.link.disconnect();
  }
}

/** A MONITOR line's first key (a script's: after the sha and the key count), ids and numbers masked; "" without one. */
function keyShape(name: string, line: string): string {
  const args = [...line.matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((m) => m[1]!);
  const key = name.startsWith("eval") ? (Number(args[2]) > 0 ? args[3] : undefined) : args[1];
  const shape = (key ?? "").replace(/p-\d+/g, "<id>").replace(/(^|:)\d+(?=:|$)/g, "$1<n>");
  return name.startsWith("eval") ? `${shape}${scriptKind(args)}` : shape;
}

/**
 * Which of the fill scripts (src/cache/l2/l2.ts) an EVAL/EVALSHA line ran, told
 * by its keys: a write's come in triples (value, lock, purge marker `…:x:…`),
 * a claim's in pairs (value, lock), after the triples of the writes it
 * carries; "" for any other script.
 */
function scriptKind(args: string[]): string {
  const count = Number(args[2]);
  const keys = args.slice(3, 3 + count);
  if (!(count >= 2) || !/:l:/.test(keys[1] ?? "")) return "";
  let triples = 0;
  while (/:x:/.test(keys[3 * triples + 2] ?? "")) triples++;
  if (3 * triples === count) return " (write)";
  return triples > 0 ? " (claim carrying writes)" : " (claim)";
}

export function usageBetween(a: RedisSnapshot, b: RedisSnapshot): RedisUsage {
  const byCommand: Record<string, number> = {};
  for (const [name, n] of Object.entries(b.calls)) {
    const d = n - (a.calls[name] ?? 0);
    if (d > 0) byCommand[name] = d;
  }
  return {
    byCommand: sortDesc(byCommand),
    total: Object.values(byCommand).reduce((s, n) => s + n, 0),
    netInBytes: Math.max(0, b.netInBytes - a.netInBytes),
    netOutBytes: Math.max(0, b.netOutBytes - a.netOutBytes),
  };
}

function sortDesc(counts: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(counts).sort((x, y) => y[1] - x[1]));
}
