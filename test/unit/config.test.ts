import { describe, expect, it } from "vitest";
import { ConfigError, parseConfig } from "../../src/config";
import { DEFAULT_POLICIES, DEFAULTS } from "../../src/config/defaults";
import { createTier } from "../../src/tier";

const base = { ORIGIN_URL: "https://products.internal.example/", PUBLIC_URL: "https://shop.example" };

function errorOf(env: Record<string, unknown>): string {
  try {
    parseConfig(env as never);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as Error).message;
  }
  throw new Error("expected a ConfigError");
}

describe("configuration", () => {
  it("has sane defaults and trims the origin URL", () => {
    const config = parseConfig(base);
    expect(config.originUrl).toBe("https://products.internal.example");
    expect(config.l2).toBeNull();
    expect(config.purgeToken).toBeNull();
    expect(config.policies).toEqual(DEFAULT_POLICIES);
  });

  it("names every bad setting at once, each in its own words, so that a deploy is mended in one round", () => {
    expect(errorOf({})).toBe(
      "2 settings are wrong: ORIGIN_URL is not set: give the base URL of the product services; PUBLIC_URL is not set: give the shop's public address, such as https://shop.example (canonical and OpenGraph URLs are built from it, never from the request); `npm run dev` and the tests set it themselves",
    );
    const error = (() => {
      try {
        parseConfig({ ...base, L2_TIMEOUT_MS: "fast", LOCATION_CACHE: "yes", CACHE_POLICIES: '{"inventory":{"tll":5}}' } as never);
      } catch (caught) {
        return caught as ConfigError;
      }
      throw new Error("expected a ConfigError");
    })();
    expect(error.setting).toBe("L2_TIMEOUT_MS, LOCATION_CACHE, CACHE_POLICIES.inventory");
    expect(error.message).toMatch(
      /^3 settings are wrong: L2_TIMEOUT_MS must be a number; LOCATION_CACHE must be "on" or "off"; CACHE_POLICIES.inventory has no setting "tll"/,
    );
    // Settings read together are reported together: a bad URL and its missing token; a bad switch hides no other bad setting.
    expect(errorOf({ ...base, UPSTASH_REDIS_REST_URL: "http://x" })).toMatch(
      /^2 settings are wrong: UPSTASH_REDIS_REST_TOKEN is not set .*; UPSTASH_REDIS_REST_URL is not a URL the Upstash client takes/,
    );
    expect(errorOf({ ...base, KNOWN_IDS: "no", FLEET_PAGE_SAMPLE: "lots" })).toMatch(
      /^2 settings are wrong: (?=.*FLEET_PAGE_SAMPLE must be a number)(?=.*KNOWN_IDS must be "on" or "off")/,
    );
  });

  it("names the missing or malformed setting", () => {
    expect(errorOf({ PUBLIC_URL: base.PUBLIC_URL })).toMatch(/^ORIGIN_URL is not set/);
    expect(errorOf({ ...base, ORIGIN_URL: "ftp://x" })).toMatch(/^ORIGIN_URL must start with http/);
    expect(errorOf({ ...base, UPSTASH_REDIS_REST_URL: "https://r.example" })).toMatch(/^UPSTASH_REDIS_REST_TOKEN is not set/);
    expect(errorOf({ ...base, L1_MAX_BYTES: "lots" })).toMatch(/^L1_MAX_BYTES must be a number/);
    expect(errorOf({ ...base, L1_MAX_BYTES: "1000" })).toMatch(/^L1_MAX_BYTES must be at least/);
    expect(errorOf({ ...base, L2_READ_REPLICAS: "yes" })).toMatch(/^L2_READ_REPLICAS must be "on" or "off"/);
    expect(errorOf({ ...base, KNOWN_IDS: "no" })).toMatch(/^KNOWN_IDS must be "on" or "off"/);
    expect(parseConfig({ ...base, KNOWN_IDS: "off" }).knownIds).toBeNull();
    expect(parseConfig(base).knownIds).not.toBeNull();
    expect(parseConfig(base).l2ReadReplicas).toBe(false);
    expect(parseConfig({ ...base, L2_READ_REPLICAS: "on" }).l2ReadReplicas).toBe(true);
    expect(errorOf({ ...base, ORIGIN_MAX_CONCURRENT: "2" })).toMatch(/^ORIGIN_MAX_CONCURRENT must be at least 4/);
    expect(errorOf({ ...base, ORIGIN_MAX_CONCURRENT: "8.5" })).toMatch(/^ORIGIN_MAX_CONCURRENT must be a whole number/);
  });

  it("says in words what is wrong inside a JSON setting: a key it does not take (and the ones it does), one it lacks, a wrong type", () => {
    expect(errorOf({ ...base, CACHE_POLICIES: '{"inventroy":{"ttl":5}}' })).toMatch(
      /^CACHE_POLICIES has no setting "inventroy" \(resources: product, inventory/,
    );
    expect(errorOf({ ...base, CACHE_POLICIES: '{"inventory":{"tll":5}}' })).toMatch(/^CACHE_POLICIES\.inventory has no setting "tll" \(.*fields: ttl, swr,/);
    expect(errorOf({ ...base, CACHE_POLICIES: '{"inventory":{"core":"false"}}' })).toBe(
      'CACHE_POLICIES.inventory.core must be a boolean, not "false" (true or false, without quotes)',
    );
    expect(errorOf({ ...base, CACHE_POLICIES: "[1]" })).toMatch(/^CACHE_POLICIES must be a JSON object/);
    expect(errorOf({ ...base, UPSTASH_REDIS_SHARDS: '[{"name":"a","token":"t"}]' })).toBe("UPSTASH_REDIS_SHARDS.0.url is missing");
    expect(errorOf({ ...base, UPSTASH_REDIS_SHARDS: '[{"name":"a","url":"https://r.example","token":"t","tls":true}]' })).toMatch(
      /^UPSTASH_REDIS_SHARDS\.0 has no setting "tls" \(a shard takes name, url, token, weight\)/,
    );
  });

  it("refuses a Redis URL the Upstash client would refuse on every request, naming the setting", () => {
    expect(errorOf({ ...base, UPSTASH_REDIS_REST_URL: "http://x", UPSTASH_REDIS_REST_TOKEN: "t" })).toMatch(
      /^UPSTASH_REDIS_REST_URL is not a URL the Upstash client takes/,
    );
    expect(errorOf({ ...base, UPSTASH_REDIS_SHARDS: '[{"name":"a","url":"http://x","token":"t"}]' })).toMatch(
      /^UPSTASH_REDIS_SHARDS\.0\.url is not a URL the Upstash client takes/,
    );
    // Every URL it takes, the tier's own parts take too: built without throwing.
    for (const url of ["http://127.0.0.1:8789", "http://localhost:8789", "https://eu1-example.upstash.io"]) {
      expect(() => createTier(parseConfig({ ...base, UPSTASH_REDIS_REST_URL: url, UPSTASH_REDIS_REST_TOKEN: "t" }))).not.toThrow();
    }
  });

  it("reads the overload bounds, with their defaults, and names a bad one", () => {
    const config = parseConfig(base);
    expect([config.coldPagesMax, config.coldPageWaitMs]).toEqual([DEFAULTS.coldPagesMax, DEFAULTS.coldPageWaitMs]);
    expect(parseConfig({ ...base, COLD_PAGES_MAX: "8" }).coldPagesMax).toBe(8);
    expect(errorOf({ ...base, COLD_PAGE_WAIT_MS: "soon" })).toMatch(/^COLD_PAGE_WAIT_MS must be a number/);
    expect(errorOf({ ...base, COLD_PAGES_MAX: "0" })).toMatch(/^COLD_PAGES_MAX must be at least 1/);
    expect(errorOf({ ...base, COLD_PAGES_MAX: "2.5" })).toMatch(/^COLD_PAGES_MAX must be a whole number/);
  });

  it("sizes the isolate's origin slots from ORIGIN_MAX_CONCURRENT", () => {
    // A quarter of the slots is kept for visitors (origin/limiter.ts): refreshes see the other three.
    expect(createTier(parseConfig({ ...base, ORIGIN_MAX_CONCURRENT: "8" })).originLimiter.refreshRoom()).toBe(6);
    expect(createTier(parseConfig(base)).originLimiter.refreshRoom()).toBe((DEFAULTS.originMaxConcurrent * 3) / 4);
  });

  it("wants PUBLIC_URL, an origin, and never falls back to the request's address", () => {
    expect(parseConfig(base).publicUrl).toBe("https://shop.example");
    expect(parseConfig({ ...base, PUBLIC_URL: "https://Shop.Example:443/" }).publicUrl).toBe("https://shop.example");
    expect(parseConfig({ ...base, PUBLIC_URL: "http://localhost:8787" }).publicUrl).toBe("http://localhost:8787");
    expect(errorOf({ ORIGIN_URL: base.ORIGIN_URL })).toMatch(/^PUBLIC_URL is not set: give the shop's public address/);
    expect(errorOf({ ...base, PUBLIC_URL: "" })).toMatch(/^PUBLIC_URL is not set/);
    expect(errorOf({ ...base, PUBLIC_URL: "shop.example" })).toMatch(/^PUBLIC_URL must be an absolute URL/);
    expect(errorOf({ ...base, PUBLIC_URL: "https://shop.example/store" })).toMatch(/^PUBLIC_URL must be an origin such as https:\/\/shop.example/);
    expect(errorOf({ ...base, PUBLIC_URL: "https://shop.example/?a=1" })).toMatch(/^PUBLIC_URL must be an origin/);
    expect(errorOf({ ...base, PUBLIC_URL: "https://user:pw@shop.example" })).toMatch(/^PUBLIC_URL must be an origin/);
  });

  it("merges per-resource policy overrides and rejects unknown ones", () => {
    const config = parseConfig({ ...base, CACHE_POLICIES: '{"inventory":{"ttl":5}}' });
    expect(config.policies.inventory).toEqual({ ...DEFAULT_POLICIES.inventory, ttl: 5 });
    expect(config.policies.product).toEqual(DEFAULT_POLICIES.product);
    expect(errorOf({ ...base, CACHE_POLICIES: "{" })).toMatch(/^CACHE_POLICIES must be a JSON object/);
    expect(errorOf({ ...base, CACHE_POLICIES: '{"invntory":{"ttl":5}}' })).toMatch(/^CACHE_POLICIES/);
    expect(errorOf({ ...base, CACHE_POLICIES: '{"inventory":{"ttl":-1}}' })).toMatch(/^CACHE_POLICIES\.inventory\.ttl must be at least 1/);
  });
});
