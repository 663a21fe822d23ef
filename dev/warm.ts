// `npm run warm`: read the fleet's hottest products (or a list) through the
// tier's own read path, from Node, so that their entries are fresh in L2
// before visitors ask. Rate-limited: warming never floods the origin.
//
//   npm run warm -- --top 500 --rate 20
//   npm run warm -- --ids ids.txt          (one id per line)
//
// Reads ORIGIN_URL, UPSTASH_REDIS_REST_URL and UPSTASH_REDIS_REST_TOKEN from
// the environment (flags --origin, --redis-url, --token override them).
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { parseConfig } from "../src/config";
import { isValidProductId } from "../src/origin/types";
import { createTier } from "../src/tier";
import { hottestIds } from "../src/warming/hotReport";
import { warmOne } from "../src/scheduled";
import { idsListed, warmProducts } from "../src/warming/warm";

const USAGE = `usage: npm run warm -- [--top N | --ids FILE] [--rate PER_SECOND] [--concurrency N]
                        [--origin URL] [--redis-url URL] [--token TOKEN]
  --top N            the fleet's N hottest products, as the isolates report them to Redis (default 200)
  --ids FILE         these ids instead (one per line)
  --rate, --concurrency   products started per second (default 10), at most this many at once (default 4)
  --origin, --redis-url, --token   default: ORIGIN_URL, UPSTASH_REDIS_REST_URL, UPSTASH_REDIS_REST_TOKEN
                     from the environment, else the local stack's (npm run dev)`;

function options() {
  try {
    return parseArgs({
      options: {
        help: { type: "boolean", short: "h" },
        origin: { type: "string" },
        "redis-url": { type: "string" },
        token: { type: "string" },
        top: { type: "string", default: "200" },
        ids: { type: "string" },
        rate: { type: "string", default: "10" },
        concurrency: { type: "string", default: "4" },
      },
    }).values;
  } catch (error) {
    console.error(`warm: ${error instanceof Error ? error.message : String(error)}\n${USAGE}`);
    process.exit(2);
  }
}

const values = options();

async function main(): Promise<number> {
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  const config = parseConfig({
    ORIGIN_URL: values.origin ?? process.env.ORIGIN_URL ?? "http://127.0.0.1:8788",
    // Required by the configuration; warming renders no page, so any address does.
    PUBLIC_URL: process.env.PUBLIC_URL || "http://localhost:8787",
    UPSTASH_REDIS_REST_URL: values["redis-url"] ?? process.env.UPSTASH_REDIS_REST_URL ?? "http://127.0.0.1:8789",
    UPSTASH_REDIS_REST_TOKEN: values.token ?? process.env.UPSTASH_REDIS_REST_TOKEN ?? "dev-gateway-token",
    KNOWN_IDS: "off",
  });
  const tier = createTier(config);
  // Redis first: an address that does not answer is said so, not taken for an empty hot list.
  if ((await tier.cache.l2!.run((redis) => redis.ping())) === undefined) {
    console.error(`warm: Redis at ${config.l2!.shards[0]!.url} does not answer (give --redis-url and --token, or UPSTASH_REDIS_REST_URL and _TOKEN)`);
    return 2;
  }
  const ids = values.ids ? idsListed(readFileSync(values.ids, "utf8")) : await hottestIds(tier.cache.l2!, config.keyPrefix, Number(values.top));
  const invalid = ids.filter((id) => !isValidProductId(id));
  if (invalid.length > 0) {
    console.error(`warm: not valid product ids: ${invalid.slice(0, 5).join(", ")}${invalid.length > 5 ? " …" : ""}`);
    return 2;
  }
  if (ids.length === 0) {
    console.log("warm: nothing to warm (no hot products reported yet; give --ids FILE)");
    return 0;
  }
  const writes: Promise<unknown>[] = [];
  const perSecond = Number(values.rate);
  console.log(`warming ${ids.length} products at ${perSecond}/s, ${values.concurrency} at a time`);
  const result = await warmProducts({
    ids,
    perSecond,
    concurrency: Number(values.concurrency),
    warmOne: (id) => warmOne(tier, id, (work) => void writes.push(work)),
    onProgress: (done, total, failed) => process.stdout.write(`\r  ${done}/${total} products${failed ? `, ${failed} failed` : ""}   `),
  });
  await Promise.allSettled(writes);
  process.stdout.write("\n");
  console.log(`warmed ${result.warmed}, failed ${result.failed}, in ${(result.ms / 1000).toFixed(1)} s`);
  return result.failed > 0 ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(`warm: ${error instanceof Error ? error.message : String(error)}`);
    process.exit(2);
  },
);
