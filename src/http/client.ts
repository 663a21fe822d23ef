// Who is asking, for sharing cold work fairly (overload/fairShare.ts): the address Cloudflare puts in CF-Connecting-IP (a client
// cannot set it: Cloudflare overwrites it), an IPv6 address by its /64 (one host, or one home, holds a whole /64 and could take a
// new address for every request), anything else one name for all ("unknown": off the platform, every request). A loopback address
// is off the platform too: Miniflare gives a request without the header 127.0.0.1, which no visitor of Cloudflare's edge ever has.
import { UNKNOWN_CLIENT } from "../overload";

const IPV4 = /^\d{1,3}(\.\d{1,3}){3}$/;
const IPV6 = /^[0-9a-f:.]{2,45}$/i;

/** The client's name: an IPv4 address, an IPv6 /64 ("2001:db8:1:2::/64"), or "unknown". */
export function clientOf(connectingIp: string | null | undefined): string {
  const ip = connectingIp?.trim() ?? "";
  if (IPV4.test(ip)) return ip.startsWith("127.") ? UNKNOWN_CLIENT : ip;
  if (ip === "::1") return UNKNOWN_CLIENT;
  if (!IPV6.test(ip) || !ip.includes(":")) return UNKNOWN_CLIENT;
  const halves = ip.split("::");
  if (halves.length > 2) return UNKNOWN_CLIENT;
  const [head = "", tail] = halves;
  const front = head ? head.split(":") : [];
  const back = tail ? tail.split(":") : [];
  // The first four groups, with "::" standing for as many zero groups as the address lacks.
  const missing = tail === undefined ? 0 : 8 - front.length - back.length;
  const groups = [...front, ...Array.from({ length: Math.max(0, missing) }, () => "0"), ...back].slice(0, 4);
  if (groups.length < 4 || groups.some((group) => !/^[0-9a-f]{1,4}$/i.test(group))) return UNKNOWN_CLIENT;
  return `${groups.map((group) => Number.parseInt(group, 16).toString(16)).join(":")}::/64`;
}
