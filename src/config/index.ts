// The worker's configuration: wrangler vars and secrets, validated once per isolate. Bad
// settings yield one message naming each of them (ConfigError), never a stack trace per request.
import * as v from "valibot";
import { PAGE_SUBJECT, RESOURCE_NAMES, type ResourceName, type ResourcePolicy } from "../origin/resources";
import { KNOWN_IDS_DEFAULTS } from "../knownIds/limits";
import { DEFAULTS, DEFAULT_POLICIES } from "./defaults";

export type { ResourcePolicy } from "../origin/resources";

/** The bindings as wrangler hands them over: vars are strings (or JSON values), secrets are strings. Each is the README's ("Configuration"). */
export interface Env {
  ORIGIN_URL?: string;
  UPSTASH_REDIS_REST_URL?: string;
  UPSTASH_REDIS_REST_TOKEN?: string;
  UPSTASH_REDIS_SHARDS?: string;
  PURGE_TOKEN?: string;
  PUBLIC_URL?: string;
  L1_MAX_BYTES?: string | number;
  L2_TIMEOUT_MS?: string | number;
  ORIGIN_MAX_CONCURRENT?: string | number;
  PURGE_POLL_MS?: string | number;
  MAX_SUBREQUESTS?: string | number;
  COLD_PAGES_MAX?: string | number;
  COLD_PAGE_WAIT_MS?: string | number;
  L2_READ_REPLICAS?: string;
  KNOWN_IDS?: string;
  LOCATION_CACHE?: string;
  CACHING?: string;
  CACHE_POLICIES?: string | Record<string, unknown>;
  FLEET?: AnalyticsEngineDataset;
  FLEET_PAGE_SAMPLE?: string | number;
}

/** The settings as parsed; each number's default and reason: ./defaults.ts. */
export interface Config {
  originUrl: string;
  /**
   * Absent when no Redis is configured: the tier then runs on L1 and the
   * origin only. One shard is the simple case; the first is the home shard.
   */
  l2: { shards: L2Endpoint[] } | null;
  /** Absent: the purge endpoint is closed. */
  purgeToken: string | null;
  /**
   * Base of the canonical and OpenGraph URLs in pages: an origin such as `https://shop.example`, no trailing
   * slash. Configuration, never the request: its Host header (and any X-Forwarded-*) is whatever the client
   * sent, and a page that named it would carry an attacker's address in a page sent `public, s-maxage`.
   */
  publicUrl: string;
  l1MaxBytes: number;
  l2TimeoutMs: number;
  /**
   * L2 answers reads (MGET) from a replica near the isolate, and scripts (lock claims) from its primary, which may be
   * far (Upstash Global). Then a page reads L2 first even when the known-ids filter lists its product; without
   * replicas the page's lock claims read L2 as they claim, which saves a round trip (cache/pageSteps.ts, readFromL2).
   */
  l2ReadReplicas: boolean;
  lockTtlMs: number;
  originMaxConcurrent: number;
  purgePollMs: number;
  maxSubrequests: number;
  coldPagesMax: number;
  coldPageWaitMs: number;
  hotPerMinute: number;
  fleetPageSample: number;
  /** Whether copies are kept in and read from the data center's Cache API (cache/location/location.ts). */
  locationCache: boolean;
  /** False (CACHING=off): no cache at all, every read from the origin (cache/bypass.ts). */
  caching: boolean;
  /** The known-ids filter's sizing; null when disabled (KNOWN_IDS=off). */
  knownIds: { room: number; fpRate: number } | null;
  compressAboveBytes: number;
  keyPrefix: string;
  policies: Record<ResourceName, ResourcePolicy>;
}

export interface L2Endpoint {
  /** Places keys on the ring: renaming a shard moves its keys. */
  name: string;
  url: string;
  token: string;
  /** Share of the keys, relative to the other shards. */
  weight: number;
}

export class ConfigError extends Error {
  constructor(
    readonly setting: string,
    detail: string,
  ) {
    super(`${setting} ${detail}`);
    this.name = "ConfigError";
  }

  /** The single problems this error stands for: itself, or those ConfigError.of joined. */
  problems: readonly ConfigError[] = [this];

  /** Several settings' problems as one error, each in its own words: a deploy is mended in one round, not a setting a try. */
  static of(problems: readonly [ConfigError, ...ConfigError[]]): ConfigError {
    const single = problems.flatMap((problem) => problem.problems);
    if (single.length === 1) return single[0]!;
    const error = new ConfigError(single.map((problem) => problem.setting).join(", "), "");
    error.message = `${single.length} settings are wrong: ${single.map((problem) => problem.message).join("; ")}`;
    error.problems = single;
    return error;
  }
}

const httpUrl = v.pipe(
  v.string(),
  v.trim(),
  v.url("must be an absolute URL"),
  v.check((s) => /^https?:\/\//.test(s), "must start with http:// or https://"),
  v.transform((s) => s.replace(/\/+$/, "")),
);

/**
 * A Redis REST URL: an http(s) URL that @upstash/redis also takes (its constructor refuses a host it
 * cannot use, `http://x` say, and would otherwise throw on every route instead of naming the setting).
 */
const redisUrl = v.pipe(
  httpUrl,
  v.check(
    (s) => /^https?:\/\/[^\s#$./?].\S*$/.test(s),
    "is not a URL the Upstash client takes: give the database's REST URL, such as https://eu1-example.upstash.io",
  ),
);

/** A number given as a var (string) or as a TOML number. */
function numberSetting(min: number, max: number) {
  return v.pipe(
    v.union([v.string(), v.number()], "must be a number"),
    v.transform((x) => (typeof x === "string" && x.trim() === "" ? NaN : Number(x))),
    v.check((n) => Number.isFinite(n), "must be a number"),
    v.check((n) => Number.isInteger(n), "must be a whole number"),
    v.minValue(min, `must be at least ${min}`),
    v.maxValue(max, `must be at most ${max}`),
  );
}

const seconds = numberSetting(0, 30 * 86_400);
const policyOverride = v.strictObject({
  ttl: v.optional(numberSetting(1, 30 * 86_400)),
  swr: v.optional(seconds),
  staleIfError: v.optional(seconds),
  negativeTtl: v.optional(numberSetting(1, 86_400)),
  core: v.optional(v.boolean()),
  originTimeoutMs: v.optional(numberSetting(10, 30_000)),
});
const policyOverrides = v.strictObject(
  Object.fromEntries(RESOURCE_NAMES.map((name) => [name, v.optional(policyOverride)])) as Record<
    ResourceName,
    v.OptionalSchema<typeof policyOverride, undefined>
  >,
);

/** An origin only: canonical URLs are `<origin>/products/<id>`, and a path here would be silently dropped. */
const publicOrigin = v.pipe(
  httpUrl,
  v.check((s) => {
    const url = new URL(s);
    return url.pathname === "/" && url.search === "" && url.hash === "" && url.username === "" && url.password === "";
  }, "must be an origin such as https://shop.example, without a path, query or credentials"),
  v.transform((s) => new URL(s).origin),
);

/**
 * The first problem with a setting, named by its path and said in words: a key the setting does not take, one
 * it lacks, a value of the wrong type. `keys`: what the setting takes, for the message about a key it does not.
 */
function read<T>(setting: string, schema: v.GenericSchema<unknown, T>, value: unknown, keys?: string): T {
  const result = v.safeParse(schema, value);
  if (result.success) return result.output;
  const issue = result.issues[0];
  const path = issue.path?.map((p) => String(p.key)) ?? [];
  const named = (parts: string[]) => [setting, ...parts].join(".");
  if (issue.type === "strict_object" && issue.expected === "never") {
    throw new ConfigError(named(path.slice(0, -1)), `has no setting ${issue.received}${keys ? ` (${keys})` : ""}`);
  }
  if (issue.kind === "schema" && issue.received === "undefined") throw new ConfigError(named(path), "is missing");
  if (issue.kind === "schema" && issue.message.startsWith("Invalid type")) {
    throw new ConfigError(
      named(path),
      `must be a ${issue.expected}, not ${issue.received}${issue.expected === "boolean" ? " (true or false, without quotes)" : ""}`,
    );
  }
  throw new ConfigError(named(path), issue.message);
}

const shardList = v.pipe(
  v.array(
    v.strictObject({
      name: v.optional(v.pipe(v.string(), v.regex(/^[A-Za-z0-9_-]{1,32}$/, "must be 1-32 letters, digits, _ or -"))),
      url: redisUrl,
      token: v.pipe(v.string(), v.minLength(1, "must not be empty")),
      weight: v.optional(v.pipe(v.number(), v.minValue(0.1), v.maxValue(10)), 1),
    }),
  ),
  v.minLength(1, "must list at least one shard"),
  v.maxLength(16, "must list at most 16 shards"),
);

function parseL2(env: Env): Config["l2"] {
  if (env.UPSTASH_REDIS_SHARDS) {
    let json: unknown;
    try {
      json = JSON.parse(env.UPSTASH_REDIS_SHARDS);
    } catch {
      throw new ConfigError("UPSTASH_REDIS_SHARDS", 'must be a JSON array such as [{"name":"a","url":"https://…","token":"…"}]');
    }
    const shards = read("UPSTASH_REDIS_SHARDS", shardList, json, "a shard takes name, url, token, weight").map((shard, i) => ({
      ...shard,
      name: shard.name ?? `shard-${i + 1}`,
    }));
    if (new Set(shards.map((shard) => shard.name)).size !== shards.length) {
      throw new ConfigError("UPSTASH_REDIS_SHARDS", "must give each shard a different name");
    }
    return { shards };
  }
  if (!env.UPSTASH_REDIS_REST_URL) return null;
  const url = read("UPSTASH_REDIS_REST_URL", redisUrl, env.UPSTASH_REDIS_REST_URL);
  // A missing token is reported on its own (parseConfig), with a bad URL if both are wrong.
  return { shards: [{ name: "l2", url, token: env.UPSTASH_REDIS_REST_TOKEN ?? "", weight: 1 }] };
}

/** The token beside a single database's URL. */
function checkRedisToken(env: Env): void {
  if (env.UPSTASH_REDIS_REST_URL && !env.UPSTASH_REDIS_SHARDS && !env.UPSTASH_REDIS_REST_TOKEN) {
    throw new ConfigError(
      "UPSTASH_REDIS_REST_TOKEN",
      "is not set while UPSTASH_REDIS_REST_URL is: add it with `wrangler secret put UPSTASH_REDIS_REST_TOKEN` (or .dev.vars locally)",
    );
  }
}

function parsePolicies(raw: Env["CACHE_POLICIES"]): Record<ResourceName, ResourcePolicy> {
  if (raw === undefined || raw === "") return DEFAULT_POLICIES;
  let json: unknown = raw;
  try {
    if (typeof raw === "string") json = JSON.parse(raw);
  } catch {
    json = null;
  }
  if (typeof json !== "object" || json === null || Array.isArray(json)) {
    throw new ConfigError(
      "CACHE_POLICIES",
      `must be a JSON object of per-resource overrides such as {"${RESOURCE_NAMES[1]}":{"ttl":5}} (resources: ${RESOURCE_NAMES.join(", ")})`,
    );
  }
  const fields = Object.keys(DEFAULT_POLICIES[RESOURCE_NAMES[0]!]).join(", ");
  const overrides = read("CACHE_POLICIES", policyOverrides, json, `resources: ${RESOURCE_NAMES.join(", ")}; their fields: ${fields}`);
  const merged = { ...DEFAULT_POLICIES };
  for (const name of Object.keys(overrides) as ResourceName[]) {
    merged[name] = { ...DEFAULT_POLICIES[name], ...overrides[name] };
  }
  return merged;
}

/** Whether a page is nothing without `resource` (a 503 when it fails): the page's subject, and those CACHE_POLICIES makes core. */
export function isCore(config: Pick<Config, "policies">, resource: ResourceName): boolean {
  return resource === PAGE_SUBJECT || config.policies[resource].core;
}

/** Validates the bindings. Throws a ConfigError naming every bad setting. */
export function parseConfig(env: Env): Config {
  const problems: ConfigError[] = [];
  /** The setting as `parse` reads it, or `fallback` with its problem noted, so that the settings after it are read too. */
  function setting<T>(parse: () => T, fallback: T): T {
    try {
      return parse();
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      problems.push(error);
      return fallback;
    }
  }
  const required = (name: "ORIGIN_URL" | "PUBLIC_URL", schema: v.GenericSchema<unknown, string>, hint: string) =>
    setting(() => {
      if (!env[name]) throw new ConfigError(name, `is not set: ${hint}`);
      return read(name, schema, env[name]);
    }, "");
  const number = (name: keyof Env, min: number, max: number, fallback: number) =>
    setting(() => (env[name] === undefined || env[name] === "" ? fallback : read(name, numberSetting(min, max), env[name])), fallback);
  /** A switch: "on" or "off", or unset for its default. */
  const onOff = (name: "L2_READ_REPLICAS" | "LOCATION_CACHE" | "CACHING" | "KNOWN_IDS", fallback: boolean) =>
    setting(() => {
      const value = env[name];
      if (value === undefined || value === "") return fallback;
      if (value !== "on" && value !== "off") throw new ConfigError(name, 'must be "on" or "off"');
      return value === "on";
    }, fallback);
  const originUrl = required("ORIGIN_URL", httpUrl, "give the base URL of the product services");
  // Required, with no fallback to the request's own URL: a deploy that
  // forgot it must say so, not build canonical URLs from the Host header.
  const publicUrl = required(
    "PUBLIC_URL",
    publicOrigin,
    "give the shop's public address, such as https://shop.example (canonical and OpenGraph URLs are built from it, never from the request); `npm run dev` and the tests set it themselves",
  );
  setting(() => checkRedisToken(env), undefined);

  const config: Config = {
    originUrl,
    l2: setting(() => parseL2(env), null),
    purgeToken: env.PURGE_TOKEN ? env.PURGE_TOKEN : null,
    publicUrl,
    l1MaxBytes: number("L1_MAX_BYTES", 1024 * 1024, 2 * DEFAULTS.l1MaxBytes, DEFAULTS.l1MaxBytes),
    l2TimeoutMs: number("L2_TIMEOUT_MS", 5, 5000, DEFAULTS.l2TimeoutMs),
    l2ReadReplicas: onOff("L2_READ_REPLICAS", false),
    lockTtlMs: DEFAULTS.lockTtlMs,
    originMaxConcurrent: number("ORIGIN_MAX_CONCURRENT", 4, 2000, DEFAULTS.originMaxConcurrent),
    purgePollMs: number("PURGE_POLL_MS", 100, 60_000, DEFAULTS.purgePollMs),
    maxSubrequests: number("MAX_SUBREQUESTS", 20, 10_000, DEFAULTS.maxSubrequests),
    coldPagesMax: number("COLD_PAGES_MAX", 1, 10_000, DEFAULTS.coldPagesMax),
    coldPageWaitMs: number("COLD_PAGE_WAIT_MS", 0, 10_000, DEFAULTS.coldPageWaitMs),
    // The filter's sizing: each rebuild sizes it for the catalog it lists, plus the room (knownIds/rebuild.ts).
    knownIds: onOff("KNOWN_IDS", true) ? { room: KNOWN_IDS_DEFAULTS.room, fpRate: KNOWN_IDS_DEFAULTS.fpRate } : null,
    locationCache: onOff("LOCATION_CACHE", true),
    caching: onOff("CACHING", true),
    hotPerMinute: DEFAULTS.hotPerMinute,
    fleetPageSample: number("FLEET_PAGE_SAMPLE", 1, 1000, DEFAULTS.fleetPageSample),
    compressAboveBytes: DEFAULTS.compressAboveBytes,
    keyPrefix: DEFAULTS.keyPrefix,
    policies: setting(() => parsePolicies(env.CACHE_POLICIES), DEFAULT_POLICIES),
  };
  const [first, ...others] = problems;
  if (first) throw ConfigError.of([first, ...others]);
  return config;
}
