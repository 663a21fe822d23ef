/**
 * CLI for the Upstash-compatible gateway:
 *
 *   npx tsx dev/gateway/main.ts --port 8789 --redis-port 6380 --token xyz
 *
 * Flags win over the environment: GATEWAY_HOST, GATEWAY_PORT, REDIS_HOST,
 * REDIS_PORT, UPSTASH_REDIS_REST_TOKEN, GATEWAY_COMMAND_TIMEOUT_MS.
 */
import { parseArgs } from "node:util";
import { startGateway, type GatewayOptions } from "./index";

const USAGE =
  "usage: tsx dev/gateway/main.ts [--port 8789] [--host 127.0.0.1] [--redis-port 6379] " + "[--redis-host 127.0.0.1] --token TOKEN [--command-timeout-ms 5000]";

function readOptions(): GatewayOptions {
  const { values } = parseArgs({
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
  if (values.help) exitWith(USAGE, 0);
  const env = process.env;
  const token = values.token ?? env.UPSTASH_REDIS_REST_TOKEN;
  if (!token) exitWith(`missing --token (or UPSTASH_REDIS_REST_TOKEN)\n${USAGE}`, 2);
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
  if (!Number.isInteger(port) || port < 0 || port > 65535) exitWith(`invalid ${flag}: ${text}`, 2);
  return port;
}

function toPositiveInt(text: string, flag: string): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value <= 0) exitWith(`invalid ${flag}: ${text}`, 2);
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
