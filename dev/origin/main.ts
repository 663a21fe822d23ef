// Runs the demo origin from the command line (`npm run origin`, `--help`):
//   npm run origin -- --port 8788 --catalog-size 10000 --latency 30
// Flags win over the environment (ORIGIN_PORT, CATALOG_SIZE, ORIGIN_LATENCY_MS,
// ORIGIN_JITTER_MS, PURGE_URL, PURGE_TOKEN, KNOWN_IDS_URL).
import { parseCommandLine, usageError } from "../cli";
import { DEFAULT_CATALOG_SIZE, startDemoOrigin, type DemoOriginOptions } from "./index";
import { MAX_CATALOG_SIZE } from "./catalog";

const DEFAULT_PORT = 8788;
const COMMAND = "npm run origin";

const USAGE = `${COMMAND}: the demo origin, the product services the tier reads (products, inventory,
reviews, recommendations, the home page's listing; docs/origin-contract.md), with an admin
API under /__admin (counters, faults, price changes that ask the tier to purge).

usage: ${COMMAND} -- [options]
  --port N              port to listen on (default ${DEFAULT_PORT}; env ORIGIN_PORT)
  --host ADDRESS        address to listen on (default 127.0.0.1)
  --catalog-size N      products in the catalog, 1 to ${MAX_CATALOG_SIZE.toLocaleString("en-US")} (default ${DEFAULT_CATALOG_SIZE}; env CATALOG_SIZE)
  --latency MS          base latency of every call (default 30; env ORIGIN_LATENCY_MS)
  --jitter MS           ± random jitter around it (default 10; env ORIGIN_JITTER_MS)
  --purge-url URL       the tier's /__purge, told of each admin change (default: none; env PURGE_URL)
  --purge-token TOKEN   bearer token for --purge-url and --known-ids-url (env PURGE_TOKEN)
  --known-ids-url URL   the tier's /__known-ids, told of each new product (default: none; env KNOWN_IDS_URL)
  -h, --help            this text

example: ${COMMAND} -- --port 8788 --catalog-size 1000 --latency 50`;

function numberOption(name: string, value: string | undefined): number | undefined {
  if (value === undefined || value === "") return undefined;
  const parsed = Number(value);
  if (!Number.isFinite(parsed)) usageError(COMMAND, `${name} must be a number, got ${JSON.stringify(value)}`);
  return parsed;
}

function readOptions(): DemoOriginOptions {
  const { values } = parseCommandLine(COMMAND, USAGE, {
    options: {
      port: { type: "string" },
      host: { type: "string" },
      "catalog-size": { type: "string" },
      latency: { type: "string" },
      jitter: { type: "string" },
      "purge-url": { type: "string" },
      "purge-token": { type: "string" },
      "known-ids-url": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  const env = process.env;
  return {
    port: numberOption("--port (ORIGIN_PORT)", values.port ?? env.ORIGIN_PORT) ?? DEFAULT_PORT,
    host: values.host ?? "127.0.0.1",
    catalogSize: numberOption("--catalog-size (CATALOG_SIZE)", values["catalog-size"] ?? env.CATALOG_SIZE),
    latencyMs: numberOption("--latency (ORIGIN_LATENCY_MS)", values.latency ?? env.ORIGIN_LATENCY_MS),
    jitterMs: numberOption("--jitter (ORIGIN_JITTER_MS)", values.jitter ?? env.ORIGIN_JITTER_MS),
    purgeUrl: values["purge-url"] ?? env.PURGE_URL,
    purgeToken: values["purge-token"] ?? env.PURGE_TOKEN,
    knownIdsUrl: values["known-ids-url"] ?? env.KNOWN_IDS_URL,
  };
}

async function main(): Promise<void> {
  const options = readOptions();
  const origin = await startDemoOrigin(options);
  console.log(`demo origin listening on ${origin.url} (${options.catalogSize ?? DEFAULT_CATALOG_SIZE} products)`);
  const stop = () => {
    origin.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
}

main().catch((err: unknown) => {
  console.error(`demo origin: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(2);
});
