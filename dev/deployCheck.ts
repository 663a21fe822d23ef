// `npm run deploy` runs this first (npm's `predeploy`): the configuration the
// Worker will be deployed with goes through the same parser the Worker runs
// (src/config), so that a deploy missing PUBLIC_URL, say, fails here with the
// message every route would otherwise answer after it. The [vars] come from
// wrangler.toml (an environment's own with `-- --env NAME`, as wrangler has
// them: an environment does not inherit the top-level [vars]); secrets live
// in Cloudflare and cannot be read from here, so the secrets are taken as set.
// (`wrangler deploy` run by hand skips this check.)
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { parse } from "smol-toml";
import { ConfigError, parseConfig, type Env } from "../src/config";

/** The secrets the tier reads: set with `wrangler secret put`, never in wrangler.toml. */
const SECRETS_TAKEN_AS_SET: Partial<Env> = {
  UPSTASH_REDIS_REST_TOKEN: "set-with-wrangler-secret",
  PURGE_TOKEN: "set-with-wrangler-secret",
};

/** The configuration error a deploy of `toml` (its `envName` environment, or the top level) would meet; null when there is none. */
export function deployConfigError(toml: string, envName?: string): string | null {
  const document = parse(toml) as { vars?: Record<string, unknown>; env?: Record<string, { vars?: Record<string, unknown> }> };
  if (envName !== undefined && !document.env?.[envName]) return `wrangler.toml has no [env.${envName}]`;
  const vars = envName === undefined ? (document.vars ?? {}) : (document.env![envName]!.vars ?? {});
  try {
    parseConfig({ ...SECRETS_TAKEN_AS_SET, ...vars } as Env);
    return null;
  } catch (error) {
    if (error instanceof ConfigError) return `Configuration error: ${error.message}`;
    throw error;
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({ options: { env: { type: "string" } }, allowPositionals: true, strict: false });
  const envName = typeof values.env === "string" ? values.env : undefined;
  const toml = readFileSync(fileURLToPath(new URL("../wrangler.toml", import.meta.url)), "utf8");
  const problem = deployConfigError(toml, envName);
  if (problem) {
    console.error(`${problem}.\nNot deploying: set it in wrangler.toml's [vars]${envName ? ` of [env.${envName}]` : ""} (README, "Configuration").`);
    process.exit(1);
  }
  console.log(`configuration of ${envName ? `[env.${envName}]` : "wrangler.toml"}: ok`);
}
