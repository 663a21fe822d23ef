// The child process of forkLocationServer (locationServer.ts): the
// benchmarks' data-center cache, in a process of its own as Cloudflare's is
// outside the isolates. Sends {type: "ready", address} once it listens, or
// {type: "failed", message}; stops on SIGTERM/SIGINT and when its parent goes
// away (IPC disconnect).
import { startLocationServer } from "./locationServer";

const maxBytes = Number(process.env.LOCATION_SERVER_MAX_BYTES);
const stop = () => process.exit(0);
process.once("SIGTERM", stop);
process.once("SIGINT", stop);
process.once("disconnect", stop);

startLocationServer({ maxBytes }).then(
  (server) => process.send?.({ type: "ready", address: server.address }),
  (err: unknown) => {
    process.send?.({ type: "failed", message: err instanceof Error ? err.message : String(err) });
    process.exit(1);
  },
);
