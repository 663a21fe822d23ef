/**
 * Reading and checking what an HTTP client sends: the token, the body, and the
 * commands in it. Everything here throws `HttpError`, which the server turns
 * into `{"error": ...}` with that status; nothing here may crash the process.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import type { IncomingMessage } from "node:http";

export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = "HttpError";
  }
}

const MAX_BODY_BYTES = 1024 * 1024;

/**
 * Returns a check for `Authorization: Bearer <token>`. Both sides are hashed
 * first so that timingSafeEqual always compares equal-length buffers and the
 * comparison reveals neither the content nor the length of the token.
 */
export function bearerCheck(token: string): (authorization: string | undefined) => boolean {
  const expected = sha256(token);
  return (authorization) => {
    const presented = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? "")?.[1];
    return presented !== undefined && timingSafeEqual(sha256(presented), expected);
  };
}

function sha256(text: string): Buffer {
  return createHash("sha256").update(text).digest();
}

/** Reads the whole body, refusing (413) anything over `limit` bytes. */
export function readBody(req: IncomingMessage, limit = MAX_BODY_BYTES): Promise<Buffer> {
  if (Number(req.headers["content-length"] ?? 0) > limit) {
    return Promise.reject(tooLarge(limit));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= limit) return void chunks.push(chunk);
      // Stop keeping data; the stream keeps flowing so the rest is discarded.
      req.off("data", onData);
      reject(tooLarge(limit));
    };
    req.on("data", onData);
    req.once("end", () => resolve(Buffer.concat(chunks, size)));
    req.once("error", (err) => reject(new HttpError(400, `ERR reading body: ${err.message}`)));
  });
}

function tooLarge(limit: number): HttpError {
  return new HttpError(413, `ERR request body larger than ${limit} bytes`);
}

export function parseJson(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString("utf8"));
  } catch (err) {
    throw new HttpError(400, `ERR failed to parse JSON body: ${(err as Error).message}`);
  }
}

/** `["SET","k","v"]` → args as strings (numbers and booleans are stringified, as Upstash does). */
export function parseCommand(value: unknown): string[] {
  if (!Array.isArray(value) || value.length === 0) {
    throw new HttpError(400, "ERR a command must be a non-empty JSON array");
  }
  const args = value.map(toArg);
  refuseUnsupported(args[0] ?? "");
  return args;
}

/** `[["SET","a","1"],["GET","a"]]` for /pipeline and /multi-exec. */
export function parseCommandList(value: unknown): string[][] {
  if (!Array.isArray(value) || value.length === 0) {
    throw new HttpError(400, "ERR a pipeline must be a non-empty JSON array of commands");
  }
  return value.map(parseCommand);
}

/** Path style, as Upstash allows: `/set/k/v`; a POST body becomes the last argument. */
export function parsePathCommand(pathname: string, body: Buffer | undefined): string[] {
  const args = pathname
    .split("/")
    .filter((segment) => segment !== "")
    .map(decodeSegment);
  if (body !== undefined && body.length > 0) args.push(body.toString("utf8"));
  return parseCommand(args);
}

function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new HttpError(400, `ERR malformed path segment: ${segment}`);
  }
}

function toArg(value: unknown): string {
  if (typeof value === "string") return value;
  if ((typeof value === "number" && Number.isFinite(value)) || typeof value === "boolean") {
    return String(value);
  }
  throw new HttpError(400, "ERR command arguments must be strings, finite numbers or booleans");
}

/**
 * Every HTTP client shares one Redis connection, so a command that changes the
 * connection's state (SELECT, MULTI, SUBSCRIBE...) or blocks it (BLPOP...)
 * would leak into, or stall, everyone else's commands.
 */
const UNSUPPORTED = new Set([
  "auth",
  "hello",
  "select",
  "reset",
  "quit",
  "client",
  "readonly",
  "readwrite",
  "multi",
  "exec",
  "discard",
  "watch",
  "unwatch",
  "subscribe",
  "psubscribe",
  "ssubscribe",
  "unsubscribe",
  "punsubscribe",
  "sunsubscribe",
  "monitor",
  "sync",
  "psync",
  "blpop",
  "brpop",
  "brpoplpush",
  "blmove",
  "blmpop",
  "bzpopmin",
  "bzpopmax",
  "bzmpop",
  "wait",
  "waitaof",
]);

function refuseUnsupported(name: string): void {
  if (name === "") throw new HttpError(400, "ERR empty command name");
  if (UNSUPPORTED.has(name.toLowerCase())) {
    throw new HttpError(400, `ERR command '${name}' is not supported by this gateway`);
  }
}
