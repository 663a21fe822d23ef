/**
 * The gateway's one connection to redis-server, and the three ways of running
 * commands on it (single, pipeline, MULTI/EXEC).
 *
 * All HTTP clients share this connection. That is safe because every request's
 * commands are written to the socket synchronously, in one turn of the event
 * loop, so commands of different requests never interleave (a MULTI...EXEC
 * block stays contiguous). It is also why commands that change connection
 * state or block it are refused (see `refusal`).
 */
import { Command, Redis, ReplyError } from "ioredis";
import type { RedisReply } from "./encode";

/** Redis could not be reached, or did not answer in time: the request gets a 503. */
export class RedisUnavailableError extends Error {
  override name = "RedisUnavailableError";
}

/** Redis answered with an error reply (`-ERR ...`). */
export class RedisReplyError extends Error {
  override name = "RedisReplyError";
}

/** Outcome of one command: a reply, or Redis' error message. */
export type Settled = { ok: true; reply: RedisReply } | { ok: false; message: string };

/**
 * ioredis reshapes some replies by command name (HGETALL becomes an object,
 * ZRANGE ... WITHSCORES pairs may be flattened, ...). The gateway must hand on
 * Redis' reply exactly, so this command skips every reply transformer.
 */
class RawCommand extends Command {
  override transformReply(result: Buffer | Buffer[]): Buffer | Buffer[] {
    return result;
  }
}

export interface RedisLinkOptions {
  host: string;
  port: number;
  commandTimeoutMs: number;
  log: (line: string) => void;
}

export interface RedisLink {
  single(args: string[]): Promise<Settled>;
  pipeline(commands: string[][]): Promise<Settled[]>;
  /** Resolves with one outcome per command; throws RedisReplyError on EXECABORT. */
  multiExec(commands: string[][]): Promise<Settled[]>;
  /** Resolves when the connection is ready, or after `ms` regardless. */
  waitReady(ms: number): Promise<void>;
  close(): Promise<void>;
}

export function connectRedis(options: RedisLinkOptions): RedisLink {
  const redis = new Redis({
    host: options.host,
    port: options.port,
    // Upstash REST answers have RESP2 shapes (flat arrays, no maps or doubles);
    // ioredis 6 would speak RESP3 by default.
    protocol: 2,
    // Fail fast while disconnected instead of queueing without bound...
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    // ...and never replay a command whose HTTP request has already failed.
    autoResendUnfulfilledCommands: false,
    commandTimeout: options.commandTimeoutMs,
    connectTimeout: Math.min(options.commandTimeoutMs, 2000),
    // Keep reconnecting forever, quickly, so the gateway heals by itself.
    retryStrategy: (attempt: number) => Math.min(attempt * 100, 1000),
    disableClientInfo: true,
  });
  const health = watchHealth(redis, options);
  const deadlineMs = options.commandTimeoutMs + 500;

  return {
    single: (args) => withDeadline(settle(send(redis, args)), deadlineMs),
    pipeline: (commands) => withDeadline(Promise.all(commands.map((args) => settle(send(redis, args)))), deadlineMs),
    multiExec: (commands) => withDeadline(runMultiExec(redis, commands), deadlineMs),
    waitReady: (ms) => waitReady(redis, ms),
    close: () => {
      health.mute(); // closing on purpose is not an outage
      return closeRedis(redis);
    },
  };
}

/** Log connection loss once per outage and recovery once, not every retry. */
function watchHealth(redis: Redis, options: RedisLinkOptions): { mute(): void } {
  let down = false;
  let muted = false;
  const target = `${options.host}:${options.port}`;
  const markDown = (reason: string) => {
    if (down || muted) return;
    down = true;
    options.log(`gateway: redis ${target} unavailable (${reason}); reconnecting in the background`);
  };
  // Without an "error" listener ioredis would print every failed retry.
  redis.on("error", (err: Error) => markDown(err.message));
  redis.on("close", () => markDown("connection closed"));
  redis.on("ready", () => {
    if (!down) return;
    down = false;
    options.log(`gateway: redis ${target} is back`);
  });
  return { mute: () => void (muted = true) };
}

function send(redis: Redis, args: string[]): Promise<RedisReply> {
  // enableOfflineQueue=false would reject too, but with a less telling message.
  if (redis.status !== "ready") {
    return Promise.reject(new RedisUnavailableError(`not connected (${redis.status})`));
  }
  const [name = "", ...rest] = args;
  const command = new RawCommand(name, rest, { replyEncoding: null });
  void redis.sendCommand(command);
  return command.promise as Promise<RedisReply>;
}

/** Redis error replies become data; anything else means Redis is unavailable. */
async function settle(reply: Promise<RedisReply>): Promise<Settled> {
  try {
    return { ok: true, reply: await reply };
  } catch (err) {
    if (err instanceof ReplyError) return { ok: false, message: (err as Error).message };
    throw new RedisUnavailableError(messageOf(err));
  }
}

async function runMultiExec(redis: Redis, commands: string[][]): Promise<Settled[]> {
  // Issued back to back in this turn of the event loop: nothing can slip in between.
  const sent = [["MULTI"], ...commands, ["EXEC"]].map((args) => settle(send(redis, args)));
  const outcomes = await Promise.all(sent);
  const exec = outcomes[outcomes.length - 1];
  if (!exec?.ok) {
    // EXECABORT alone does not say which command was wrong; the queueing error does.
    const queueError = outcomes.slice(1, -1).find((o) => !o.ok);
    const detail = queueError && !queueError.ok ? ` (${queueError.message.trim()})` : "";
    throw new RedisReplyError(`${exec?.ok === false ? exec.message : "EXEC failed"}${detail}`);
  }
  if (!Array.isArray(exec.reply)) throw new RedisReplyError("EXECABORT Transaction aborted");
  return exec.reply.map((reply): Settled => (reply instanceof Error ? { ok: false, message: reply.message } : { ok: true, reply }));
}

/**
 * ioredis' commandTimeout already bounds every command; this outer bound makes
 * sure no HTTP request can hang even if a command is somehow never settled.
 */
function withDeadline<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new RedisUnavailableError(`no answer from redis within ${ms} ms`)), ms);
  });
  work.catch(() => {}); // may still settle after the deadline has answered
  return Promise.race([work, deadline]).finally(() => clearTimeout(timer));
}

function waitReady(redis: Redis, ms: number): Promise<void> {
  if (redis.status === "ready") return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      redis.off("ready", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    redis.once("ready", done);
  });
}

async function closeRedis(redis: Redis): Promise<void> {
  if (redis.status === "end") return;
  const ended = new Promise<void>((resolve) => redis.once("end", () => resolve()));
  // disconnect() rather than quit(): quit would wait for (or fail on) a dead server.
  redis.disconnect(false);
  await Promise.race([ended, new Promise((resolve) => setTimeout(resolve, 1000))]);
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
