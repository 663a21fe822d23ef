// A forked child that runs ONE demo origin (dev/origin) for one peer system
// (Nginx or Varnish), so that each system under test has its own origin:
// its counters are that system's alone, and its catalog changes (the price
// change scenario) do not leak into another system's run.
//
// Like bench/servers.ts (which runs the tier's origin next to redis and the
// gateway), it lives in its own process so that the load generator's event
// loop can never delay an origin answer.
//   → {type: "ready", originUrl}    once it listens
//   → {type: "failed", message}     could not start
// It stops on SIGTERM/SIGINT and when the parent goes away (IPC disconnect).
import { setMaxListeners } from "node:events";
import { startDemoOrigin, type DemoOrigin } from "../../dev/origin";

export interface OriginChildOptions {
  catalogSize: number;
  latencyMs: number;
  jitterMs: number;
}

export type OriginChildMessage = { type: "ready"; originUrl: string } | { type: "failed"; message: string };

function send(message: OriginChildMessage): void {
  if (process.connected) process.send?.(message);
}

let origin: DemoOrigin | undefined;
let stopping: Promise<void> | undefined;

function stop(code: number): Promise<void> {
  stopping ??= (async () => {
    await origin?.close().catch(() => undefined);
    process.exit(code);
  })();
  return stopping;
}

process.once("SIGTERM", () => void stop(0));
process.once("SIGINT", () => void stop(0));
process.once("disconnect", () => void stop(0));

async function main(): Promise<void> {
  // Pending delays share one AbortSignal in the demo origin: no "possible leak" noise.
  setMaxListeners(0);
  const options = JSON.parse(process.env.PEERS_ORIGIN_OPTIONS ?? "{}") as OriginChildOptions;
  origin = await startDemoOrigin({ host: "127.0.0.1", catalogSize: options.catalogSize, latencyMs: options.latencyMs, jitterMs: options.jitterMs });
  send({ type: "ready", originUrl: origin.url });
}

main().catch((err: unknown) => {
  send({ type: "failed", message: err instanceof Error ? err.message : String(err) });
  void stop(1);
});
