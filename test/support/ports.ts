import { createServer } from "node:net";

/**
 * A TCP port that was free a moment ago on 127.0.0.1 (the OS picks it by
 * binding port 0). Someone else may still grab it before the caller binds it;
 * callers that spawn servers should retry with a new port if the bind fails.
 */
export async function freePort(host = "127.0.0.1"): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once("error", reject);
    server.listen(0, host, () => {
      const address = server.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      server.close((err) => (err ? reject(err) : port ? resolve(port) : reject(new Error("no port"))));
    });
  });
}
