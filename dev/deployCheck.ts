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

/** The vars that name another service or the shop: on Cloudflare, an address on this machine reaches nothing. */
const ADDRESSES = ["ORIGIN_URL", "UPSTASH_REDIS_REST_URL", "PUBLIC_URL"] as const;
const LOOPBACK = /^(localhost|127(\.\d{1,3}){3}|\[::1\]|0\.0\.0\.0)$/i;

/** The host of `value` when it is a URL, else null (parseConfig names a value that is not). */
function hostnameOf(value: string): string | null {
  try {
    return new URL(value).hostname;
  } catch {
    return null;
  }
}

/**
 * The configuration error a deploy of `toml` (its `envName` environment, or
 * the top level) would meet; null when there is none. Every problem it knows
 * of at once, in the Worker's own words (`Configuration error: N settings are
 * wrong: …; …`): parseConfig's, then the addresses left on this machine, so
 * that a deploy is mended in one round, not a run a setting.
 */
export function deployConfigError(toml: string, envName?: string): string | null {
  const document = parse(toml) as { vars?: Record<string, unknown>; env?: Record<string, { vars?: Record<string, unknown> }> };
  if (envName !== undefined && !document.env?.[envName]) return `wrangler.toml has no [env.${envName}]`;
  const vars = envName === undefined ? (document.vars ?? {}) : (document.env![envName]!.vars ?? {});
  let parsed: ConfigError | null = null;
  try {
    parseConfig({ ...SECRETS_TAKEN_AS_SET, ...vars } as Env);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    parsed = error;
  }
  const named = parsed ? parsed.problems.map((problem) => problem.setting) : [];
  // wrangler.toml's own [vars] are the local stack's (wrangler dev): a deploy that kept one points the Worker at itself.
  const local: ConfigError[] = [];
  for (const name of ADDRESSES) {
    const value = vars[name];
    if (named.includes(name) || typeof value !== "string") continue;
    const hostname = hostnameOf(value);
    if (hostname !== null && LOOPBACK.test(hostname)) {
      local.push(new ConfigError(name, `is ${value}, an address on this machine (the local stack's): give the deployed service's address`));
    }
  }
  const [first, ...others] = [...(parsed?.problems ?? []), ...local];
  return first ? `Configuration error: ${ConfigError.of([first, ...others]).message}` : null;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({ options: { env: { type: "string" } }, allowPositionals: true, strict: false });
  const envName = typeof values.env === "string" ? values.env : undefined;
  const toml = readFileSync(fileURLToPath(new URL("../wrangler.toml", import.meta.url)), "utf8");
  const problem = deployConfigError(toml, envName);
  if (problem) {
    const where = problem.startsWith("wrangler.toml has no")
      ? "add that environment to wrangler.toml"
      : `set ${/^Configuration error: \d+ settings are wrong/.test(problem) ? "them" : "it"} in wrangler.toml's [vars]${envName ? ` of [env.${envName}]` : ""}`;
    console.error(`${problem}.\nNot deploying: ${where} (README, "Configuration").`);
    process.exit(1);
  }
  console.log(`configuration of ${envName ? `[env.${envName}]` : "wrangler.toml"}: ok`);
}
