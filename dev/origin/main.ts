// Runs the demo origin from the command line:
//   npx tsx dev/origin/main.ts --port 8788 --catalog-size 10000 --latency 30
// Flags win over the environment (ORIGIN_PORT, CATALOG_SIZE, ORIGIN_LATENCY_MS,
// ORIGIN_JITTER_MS, PURGE_URL, PURGE_TOKEN, KNOWN_IDS_URL).
import { parseArgs } from "node:util";
import { DEFAULT_CATALOG_SIZE, startDemoOrigin, type DemoOriginOptions } from "./index";

const DEFAULT_PORT = 8788;

function numberOption(name: string, value: string | undefined): number | undefined {
  if (value === undefined || value === "") return undefined;
  const parsed = Number(value);
  if (!Number.isFinite(parsed)) throw new Error(`${name} must be a number, got ${JSON.stringify(value)}`);
  return parsed;
}

function readOptions(): DemoOriginOptions {
  const { values } = parseArgs({
    options: {
      port: { type: "string" },
      host: { type: "string" },
      "catalog-size": { type: "string" },
      latency: { type: "string" },
      jitter: { type: "string" },
      "purge-url": { type: "string" },
      "purge-token": { type: "string" },
      "known-ids-url": { type: "string" },
    },
  });
  const env = process.env;
  return {
    port: numberOption("--port", values.port ?? env.ORIGIN_PORT) ?? DEFAULT_PORT,
    host: values.host ?? "127.0.0.1",
    catalogSize: numberOption("--catalog-size", values["catalog-size"] ?? env.CATALOG_SIZE),
    latencyMs: numberOption("--latency", values.latency ?? env.ORIGIN_LATENCY_MS),
    jitterMs: numberOption("--jitter", values.jitter ?? env.ORIGIN_JITTER_MS),
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
