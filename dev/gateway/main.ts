/**
 * CLI for the Upstash-compatible gateway (`npm run gateway`, `--help`):
 *
 *   npm run gateway -- --port 8789 --redis-port 6380 --token xyz
 *
 * Flags win over the environment: GATEWAY_HOST, GATEWAY_PORT, REDIS_HOST,
 * REDIS_PORT, UPSTASH_REDIS_REST_TOKEN, GATEWAY_COMMAND_TIMEOUT_MS.
 */
import { parseCommandLine, usageError } from "../cli";
import { startGateway, type GatewayOptions } from "./index";

const COMMAND = "npm run gateway";

const USAGE = `${COMMAND}: the Upstash REST gateway, Upstash's REST API (the one @upstash/redis speaks)
in front of a local redis-server, so that the worker's L2 runs on this machine.

usage: ${COMMAND} -- --token TOKEN [options]
  --token TOKEN              bearer token clients must present (required; env UPSTASH_REDIS_REST_TOKEN)
  --port N                   port to listen on (default 8789; env GATEWAY_PORT)
  --host ADDRESS             address to listen on (default 127.0.0.1; env GATEWAY_HOST)
  --redis-port N             redis-server's port (default 6379; env REDIS_PORT)
  --redis-host ADDRESS       redis-server's address (default 127.0.0.1; env REDIS_HOST)
  --command-timeout-ms MS    longest wait for Redis's answer to a command (default 5000; env GATEWAY_COMMAND_TIMEOUT_MS)
  -h, --help                 this text

example: ${COMMAND} -- --port 8789 --redis-port 6379 --token dev-gateway-token`;

function readOptions(): GatewayOptions {
  const { values } = parseCommandLine(COMMAND, USAGE, {
    options: {
      port: { type: "string" },
      host: { type: "string" },
      "redis-port": { type: "string" },
      "redis-host": { type: "string" },
      token: { type: "string" },
      "command-timeout-ms": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  const env = process.env;
  const token = values.token ?? env.UPSTASH_REDIS_REST_TOKEN;
  if (!token) usageError(COMMAND, "missing --token (or UPSTASH_REDIS_REST_TOKEN)");
  return {
    port: toPort(values.port ?? env.GATEWAY_PORT ?? "8789", "--port"),
    host: values.host ?? env.GATEWAY_HOST ?? "127.0.0.1",
    redisPort: toPort(values["redis-port"] ?? env.REDIS_PORT ?? "6379", "--redis-port"),
    redisHost: values["redis-host"] ?? env.REDIS_HOST ?? "127.0.0.1",
    token,
    commandTimeoutMs: toPositiveInt(values["command-timeout-ms"] ?? env.GATEWAY_COMMAND_TIMEOUT_MS ?? "5000", "--command-timeout-ms"),
  };
}

function toPort(text: string, flag: string): number {
  const port = Number(text);
  if (!Number.isInteger(port) || port < 0 || port > 65535) usageError(COMMAND, `${flag} must be a port number (0 to 65535), got ${JSON.stringify(text)}`);
  return port;
}

function toPositiveInt(text: string, flag: string): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value <= 0) usageError(COMMAND, `${flag} must be a whole number above 0, got ${JSON.stringify(text)}`);
  return value;
}

function exitWith(message: string, code: number): never {
  (code === 0 ? console.log : console.error)(message);
  process.exit(code);
}

async function main(): Promise<void> {
  const options = readOptions();
  const gateway = await startGateway(options);
  console.log(`gateway listening on ${gateway.url} -> redis ${options.redisHost}:${options.redisPort}`);
  let stopping = false;
  const stop = (signal: NodeJS.Signals) => {
    // A second signal means "now": do not wait for a stuck close.
    if (stopping) process.exit(1);
    stopping = true;
    gateway.close().then(
      () => process.exit(0),
      (err: unknown) => exitWith(`gateway: error while stopping on ${signal}: ${String(err)}`, 1),
    );
  };
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
}

main().catch((err: unknown) => exitWith(`gateway: ${(err as Error)?.message ?? String(err)}`, 1));
