// Reading the tier's Cache-Status (RFC 9211) in the tests and the benchmarks:
// an RFC 8941 list with one member per resource, named by its `detail`.
import { parseList } from "structured-headers";

/** The Cache-Status member of one resource (`pp-l1; hit; ttl=3; detail="product"`), or "" if none. */
export function member(cacheStatus: string, resource: string): string {
  // Parsed as a list, then written back in the tier's own spelling, so that tests match on text.
  const found = parseList(cacheStatus).find(([, params]) => String(params.get("detail") ?? "").split(" ")[0] === resource);
  if (!found) return "";
  const [cache, params] = found;
  const spelled = [...params].map(([key, value]) => (value === true ? key : `${key}=${typeof value === "string" ? `"${value}"` : String(value)}`));
  return [String(cache), ...spelled].join("; ");
}
