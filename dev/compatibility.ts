// The Workers runtime's compatibility settings, read from wrangler.toml, so
// that everything which runs the bundle outside `wrangler` (the integration
// tests, the benchmark) gets exactly what is deployed: the same date and the
// same flags, never a copy that drifts. Read with the TOML parser the deploy
// check uses (dev/deployCheck.ts); anything but the shapes below is an
// error, not a guess.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { parse } from "smol-toml";

export interface Compatibility {
  /** `compatibility_date`, e.g. "2026-04-20". */
  compatibilityDate: string;
  /** `compatibility_flags`, e.g. ["nodejs_compat"]; empty when the key is absent. */
  compatibilityFlags: string[];
}

const WRANGLER_TOML = fileURLToPath(new URL("../wrangler.toml", import.meta.url));

/** The compatibility settings of a wrangler.toml's text. */
function parseCompatibility(toml: string): Compatibility {
  const document = parse(toml);
  const date = document.compatibility_date;
  if (date === undefined) throw new Error("wrangler.toml: no top-level compatibility_date");
  // A quoted date: wrangler reads a string (TOML's bare dates are another type).
  if (typeof date !== "string" || !/^\d{4}-\d{2}-\d{2}$/.test(date))
    throw new Error(`wrangler.toml: compatibility_date must be a string "YYYY-MM-DD", found ${String(date)}`);
  const flags = document.compatibility_flags ?? [];
  if (!Array.isArray(flags) || !flags.every((flag): flag is string => typeof flag === "string"))
    throw new Error(`wrangler.toml: compatibility_flags must be an array of strings, found ${JSON.stringify(flags)}`);
  return { compatibilityDate: date, compatibilityFlags: flags };
}

/** The deployed settings: read once, from the wrangler.toml next to this folder. */
export const { compatibilityDate, compatibilityFlags }: Compatibility = parseCompatibility(readFileSync(WRANGLER_TOML, "utf8"));
