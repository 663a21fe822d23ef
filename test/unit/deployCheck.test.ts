// The check `npm run deploy` makes first (dev/deployCheck.ts): the vars it
// will deploy, through the Worker's own configuration parser.
import { describe, expect, it } from "vitest";
import { deployConfigError } from "../../dev/deployCheck";

const BASE = `name = "shop"\nmain = "src/index.ts"\n`;

describe("the deploy's configuration check", () => {
  it("fails a deploy without PUBLIC_URL with the message every route would give", () => {
    const toml = `${BASE}[vars]\nORIGIN_URL = "https://products.internal"\n`;
    expect(deployConfigError(toml)).toMatch(/^Configuration error: PUBLIC_URL is not set/);
  });

  it("passes a complete one, secrets taken as set with wrangler secret", () => {
    const toml = `${BASE}[vars]\nORIGIN_URL = "https://products.internal"\nPUBLIC_URL = "https://shop.example"\nUPSTASH_REDIS_REST_URL = "https://eu.upstash.io"\n`;
    expect(deployConfigError(toml)).toBeNull();
  });

  it("names a bad value", () => {
    const toml = `${BASE}[vars]\nORIGIN_URL = "https://products.internal"\nPUBLIC_URL = "https://shop.example"\nCOLD_PAGE_WAIT_MS = "soon"\n`;
    expect(deployConfigError(toml)).toBe("Configuration error: COLD_PAGE_WAIT_MS must be a number");
  });

  it("fails a deploy that kept the local stack's addresses (wrangler.toml's own [vars] are for wrangler dev)", () => {
    const toml = (origin: string, redis: string) =>
      `${BASE}[vars]\nORIGIN_URL = "${origin}"\nPUBLIC_URL = "https://shop.example"\nUPSTASH_REDIS_REST_URL = "${redis}"\n`;
    expect(deployConfigError(toml("http://127.0.0.1:8788", "https://eu.upstash.io"))).toBe(
      "Configuration error: ORIGIN_URL is http://127.0.0.1:8788, an address on this machine (the local stack's): give the deployed service's address",
    );
    expect(deployConfigError(toml("https://products.internal", "http://localhost:8789"))).toMatch(
      /^Configuration error: UPSTASH_REDIS_REST_URL is http:\/\/localhost:8789/,
    );
    expect(deployConfigError(toml("https://products.internal", "https://eu.upstash.io"))).toBeNull();
  });

  it("names every problem in one message: no PUBLIC_URL, and the origin and Redis still on this machine", () => {
    const toml = `${BASE}[vars]\nORIGIN_URL = "http://localhost:8788"\nUPSTASH_REDIS_REST_URL = "http://127.0.0.1:8789"\n`;
    const message = deployConfigError(toml);
    expect(message).toMatch(/^Configuration error: 3 settings are wrong: PUBLIC_URL is not set: /);
    expect(message).toContain("; ORIGIN_URL is http://localhost:8788, an address on this machine (the local stack's): give the deployed service's address");
    expect(message).toContain(
      "; UPSTASH_REDIS_REST_URL is http://127.0.0.1:8789, an address on this machine (the local stack's): give the deployed service's address",
    );
  });

  it("names parseConfig's problems and the deploy's own together, counting each setting once", () => {
    const toml = `${BASE}[vars]\nORIGIN_URL = "http://127.0.0.1:8788"\nPUBLIC_URL = "https://shop.example"\nCOLD_PAGE_WAIT_MS = "soon"\n`;
    expect(deployConfigError(toml)).toBe(
      "Configuration error: 2 settings are wrong: COLD_PAGE_WAIT_MS must be a number; ORIGIN_URL is http://127.0.0.1:8788, an address on this machine (the local stack's): give the deployed service's address",
    );
    // Several of parseConfig's, then a local address: one list, one count.
    const several = `${BASE}[vars]\nORIGIN_URL = "https://products.internal"\nCOLD_PAGE_WAIT_MS = "soon"\nUPSTASH_REDIS_REST_URL = "http://localhost:8789"\n`;
    expect(deployConfigError(several)).toMatch(
      /^Configuration error: 3 settings are wrong: PUBLIC_URL is not set: .*; COLD_PAGE_WAIT_MS must be a number; UPSTASH_REDIS_REST_URL is http:\/\/localhost:8789, an address on this machine/,
    );
    // A setting parseConfig refuses is not named again for its address (nor is a value that is no URL read as one).
    const refused = `${BASE}[vars]\nORIGIN_URL = "https://products.internal"\nPUBLIC_URL = "http://localhost:8787/shop"\n`;
    expect(deployConfigError(refused)).toBe(
      "Configuration error: PUBLIC_URL must be an origin such as https://shop.example, without a path, query or credentials",
    );
    expect(deployConfigError(`${BASE}[vars]\nORIGIN_URL = "not a url"\nPUBLIC_URL = "https://shop.example"\n`)).toMatch(/^Configuration error: ORIGIN_URL /);
  });

  it("reads an environment's own vars, which do not inherit the top level's", () => {
    const toml = `${BASE}[vars]\nORIGIN_URL = "https://a"\nPUBLIC_URL = "https://shop.example"\n[env.staging.vars]\nORIGIN_URL = "https://b"\n`;
    expect(deployConfigError(toml)).toBeNull();
    expect(deployConfigError(toml, "staging")).toMatch(/^Configuration error: PUBLIC_URL is not set/);
    expect(deployConfigError(toml, "prod")).toBe("wrangler.toml has no [env.prod]");
  });

  it("fails this repository's wrangler.toml, which leaves PUBLIC_URL to the environment you deploy", async () => {
    const { readFileSync } = await import("node:fs");
    expect(deployConfigError(readFileSync("wrangler.toml", "utf8"))).toMatch(/PUBLIC_URL is not set/);
  });
});
