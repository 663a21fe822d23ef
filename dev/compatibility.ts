// The Workers runtime's compatibility settings, read from wrangler.toml, so
// that everything which runs the bundle outside `wrangler` (the integration
// tests, the benchmark) gets exactly what is deployed: the same date and the
// same flags, never a copy that drifts.
//
// Only the two top-level keys are read, by a small parser of the TOML they
// are written in (a basic or literal string; an array of such strings, on
// one line or several; comments). Anything else about them is an error, not
// a guess.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

export interface Compatibility {
  /** `compatibility_date`, e.g. "2026-04-20". */
  compatibilityDate: string;
  /** `compatibility_flags`, e.g. ["nodejs_compat"]; empty when the key is absent. */
  compatibilityFlags: string[];
}

const WRANGLER_TOML = fileURLToPath(new URL("../wrangler.toml", import.meta.url));

/** One TOML string at the start of `text`: its value and what follows it; undefined if there is none. */
function leadingString(text: string): { value: string; rest: string } | undefined {
  const literal = /^'([^'\n]*)'/.exec(text);
  if (literal) return { value: literal[1]!, rest: text.slice(literal[0].length) };
  const basic = /^"((?:[^"\\\n]|\\.)*)"/.exec(text);
  if (!basic) return undefined;
  // Flags and dates need no escapes; JSON's are a subset of TOML's basic-string escapes.
  return { value: JSON.parse(`"${basic[1]!}"`) as string, rest: text.slice(basic[0].length) };
}

/** Drops a trailing comment (the values read here never contain `#`) and surrounding blanks. */
const withoutComment = (text: string) => text.replace(/#.*$/, "").trim();

/** The top-level `key = value` pairs of a TOML document, values as raw text (arrays joined across lines). */
function topLevelValues(toml: string): Map<string, string> {
  const values = new Map<string, string>();
  const lines = toml.split(/\r?\n/);
  for (let index = 0; index < lines.length; index++) {
    const line = withoutComment(lines[index]!);
    if (line.startsWith("[")) break; // the first table: top-level keys are over
    const pair = /^([A-Za-z0-9_-]+)\s*=\s*(.*)$/.exec(line);
    if (!pair) continue;
    let value = pair[2]!;
    // A multi-line array: gather lines up to the closing bracket.
    if (value.startsWith("[")) {
      while (!value.includes("]") && index + 1 < lines.length) value += ` ${withoutComment(lines[++index]!)}`;
    }
    values.set(pair[1]!, value);
  }
  return values;
}

function parseString(key: string, raw: string): string {
  const parsed = leadingString(raw);
  if (parsed?.rest.trim() !== "") throw new Error(`wrangler.toml: ${key} must be one string, found ${raw}`);
  return parsed.value;
}

function parseStringArray(key: string, raw: string): string[] {
  const inner = /^\[(.*)\]$/.exec(raw.trim());
  if (!inner) throw new Error(`wrangler.toml: ${key} must be an array of strings, found ${raw}`);
  const items: string[] = [];
  let rest = inner[1]!.trim();
  while (rest !== "") {
    const parsed = leadingString(rest);
    if (!parsed) throw new Error(`wrangler.toml: ${key} must be an array of strings, found ${raw}`);
    items.push(parsed.value);
    rest = parsed.rest.trim();
    if (rest.startsWith(",")) rest = rest.slice(1).trim();
    else if (rest !== "") throw new Error(`wrangler.toml: ${key} must be an array of strings, found ${raw}`);
  }
  return items;
}

/** The compatibility settings of a wrangler.toml's text. */
function parseCompatibility(toml: string): Compatibility {
  const values = topLevelValues(toml);
  const date = values.get("compatibility_date");
  if (date === undefined) throw new Error("wrangler.toml: no top-level compatibility_date");
  const compatibilityDate = parseString("compatibility_date", date);
  if (!/^\d{4}-\d{2}-\d{2}$/.test(compatibilityDate)) throw new Error(`wrangler.toml: compatibility_date is not YYYY-MM-DD: ${compatibilityDate}`);
  const flags = values.get("compatibility_flags");
  return { compatibilityDate, compatibilityFlags: flags === undefined ? [] : parseStringArray("compatibility_flags", flags) };
}

/** The deployed settings: read once, from the wrangler.toml next to this folder. */
export const { compatibilityDate, compatibilityFlags }: Compatibility = parseCompatibility(readFileSync(WRANGLER_TOML, "utf8"));
