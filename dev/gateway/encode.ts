/**
 * Turning raw Redis replies into the JSON shapes the Upstash REST API uses.
 *
 * With `Upstash-Encoding: base64` (which @upstash/redis sends by default) every
 * string in a result is base64 of the exact bytes Redis returned, so binary
 * values survive JSON. The client's `decode()` special-cases exactly one thing:
 * a *top-level* result equal to the string "OK" is taken as-is (Upstash sends
 * status replies raw). Strings nested in arrays are always base64-decoded, so
 * only the top level may carry a raw "OK".
 */

/** A reply as read from Redis with buffers (RESP2): bulk/simple strings are Buffers. */
export type RedisReply = Buffer | string | number | null | undefined | Error | RedisReply[];

export type JsonValue = string | number | null | JsonValue[];

/** One entry of a /pipeline or /multi-exec answer, also the body of a single command. */
export type CommandResult = { result: JsonValue } | { error: string };

const OK = Buffer.from("OK");

export function encodeResult(reply: RedisReply, base64: boolean): JsonValue {
  // Raw "OK" at the top level is what Upstash sends and what the client expects.
  if (base64 && Buffer.isBuffer(reply) && reply.equals(OK)) return "OK";
  return encodeValue(reply, base64);
}

function encodeValue(reply: RedisReply, base64: boolean): JsonValue {
  if (reply === null || reply === undefined) return null;
  if (typeof reply === "number") return reply;
  if (Array.isArray(reply)) return reply.map((item) => encodeValue(item, base64));
  // An error nested in an array (e.g. a Lua table holding {err=...}) has no
  // JSON slot of its own in the Upstash format: report its message as a string.
  if (reply instanceof Error) return encodeBytes(Buffer.from(reply.message), base64);
  return encodeBytes(typeof reply === "string" ? Buffer.from(reply) : reply, base64);
}

function encodeBytes(bytes: Buffer, base64: boolean): string {
  return base64 ? bytes.toString("base64") : bytes.toString("utf8");
}
