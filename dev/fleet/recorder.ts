// A local stand-in for Workers Analytics Engine (AE), for dev and the tests:
// one Node HTTP server that
// - takes the data points the workers write, as dev/fleet/recorderBinding.js
//   (the AE binding's stand-in inside workerd) sends them:
//   `POST /points` with JSON `{ points: [{ dataset, timestamp (ms), indexes,
//   blobs, doubles }], dropped }`, at most MAX_BODY_BYTES (413 past it; 400,
//   with a JSON error, for anything malformed, and then nothing of the batch
//   is stored);
// - answers SQL as AE's SQL API does: `POST /client/v4/accounts/<any account
//   id>/analytics_engine/sql`, the query as the body, `Authorization: Bearer
//   <token>` when the recorder has a token (401 otherwise), answered as
//   ClickHouse's `FORMAT JSON`: `{ meta: [{ name, type }], data: [{ column:
//   value }], rows, rows_before_limit_at_least }`; a query it cannot run is a
//   422 whose plain-text body says what was not understood.
//
// The points live in SQLite (sql.js: WebAssembly, in memory, nothing on disk),
// one table per dataset, named after it and made at its first point, with AE's
// columns: dataset, timestamp (unix seconds, REAL, with the milliseconds),
// _sample_interval (always 1: nothing is sampled here), index1, blob1..blob20
// (TEXT, '' when not written) and double1..double20 (REAL, 0 when not
// written). At most `maxPoints` rows in all the tables; past it the oldest go.
//
// The SQL: the fleet's queries are written for AE, and the same text goes to
// AE in production. They use a small subset of AE's ClickHouse dialect, which
// this recorder turns into SQLite (outside string literals; a ClickHouse
// string literal's backslash escapes \\ \' \n \t \r \0 become SQLite's own):
// - `FORMAT JSON` ends every query (any case), and is taken off; no FORMAT, or
//   another one, is a 422.
// - `INTERVAL 'N' SECOND|MINUTE|HOUR|DAY` (plural too, N quoted or not) is N
//   in seconds, a number: `timestamp` is in seconds, so
//   `timestamp > NOW() - INTERVAL '1' HOUR` reads as in AE. Another INTERVAL
//   is a 422.
// - `NOW()` is the time of the query in unix seconds (a function made here;
//   the same value all through one query).
// - `toUInt32(x)` is floor(x) and `intDiv(a, b)` is floor(a / b), both
//   integers (functions made here), so
//   `intDiv(toUInt32(timestamp), 60) * 60 AS minute` is the minute's start.
// - `if(c, a, b)` is SQLite's `iif(c, a, b)`.
// - `SUM(x)` over no rows is 0, as in ClickHouse (SQLite's is NULL).
// - `count()` is SQLite's own (it counts rows, as `count(*)`).
// - The table in FROM is the dataset's name, as in AE; a dataset no point has
//   reached yet is no table yet (a 422 naming it).
// - One statement, a SELECT (or WITH ... SELECT), run read-only.
// Anything else goes to SQLite as written, so a construct of AE's that SQLite
// lacks (toStartOfInterval, quantileWeighted, ...) is a 422 with SQLite's
// message ("no such function: toStartOfInterval") and the query as SQLite ran
// it: add the construct here before a fleet query uses it. Where the answers
// differ from AE's:
// `timestamp` reads as unix seconds (AE's is a DateTime, '2026-01-01 00:00:00'),
// and `NOW()` likewise; an unaliased column is named after the expression as
// SQLite ran it (alias every computed column, `AS name`); the column types in
// `meta` are read off the values (text: String; any fraction: Float64; only
// integers: UInt64, or Int64 with a negative one, their values written as
// strings as ClickHouse writes 64-bit integers, so read numbers with Number());
// rows_before_limit_at_least is the number of rows returned.
//
// `DEV_ISOLATES=2 npm run dev` runs one on LOCAL_RECORDER (dev/fleet/local.ts),
// the tests and bench:soak their own; a GET of / answers its counts as JSON.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import initSqlJs from "sql.js";
import { bearerCheck } from "../gateway/request";
import { readBodyUpTo } from "../harness/body";

type SqlDatabase = initSqlJs.Database;
type SqlStatement = initSqlJs.Statement;

interface RecorderOptions {
  /** 0 or unset: a port the OS picks. */
  port?: number;
  /** When set, the SQL API wants `Authorization: Bearer <token>`. */
  token?: string;
  /** Rows kept in all the datasets together; past it the oldest go (DEFAULT_MAX_POINTS). */
  maxPoints?: number;
}

export interface Recorder {
  /** http://127.0.0.1:port */
  url: string;
  /** Where the binding (recorderBinding.js, `env.url`) posts its points. */
  pointsUrl: string;
  /** AE's SQL API address (account id `local`; any other is taken too). */
  sqlUrl: string;
  /** Rows held now, in all the datasets. */
  points(): number;
  /** Batches of points stored so far. */
  batches(): number;
  /** Points the bindings reported dropped (their buffers full, or a batch refused). */
  dropped(): number;
  close(): Promise<void>;
}

const DEFAULT_MAX_POINTS = 2_000_000;
/**
 * Largest batch of points a POST may carry: room for a binding's whole buffer (10,000 points, after
 * the recorder was away) at 1.6 KB a point; a larger batch is refused (413) and the binding drops it.
 */
const MAX_BODY_BYTES = 16 * 1024 * 1024;
/** Largest query text. */
const MAX_SQL_BYTES = 256 * 1024;
const DATASET_NAME = /^[A-Za-z0-9_]{1,64}$/;
const MAX_INDEXES = 1;
const MAX_BLOBS = 20;
const MAX_DOUBLES = 20;
const SQL_PATH = /^\/client\/v4\/accounts\/[^/]+\/analytics_engine\/sql$/;

const BLOB_COLUMNS = Array.from({ length: MAX_BLOBS }, (_, i) => `blob${i + 1}`);
const DOUBLE_COLUMNS = Array.from({ length: MAX_DOUBLES }, (_, i) => `double${i + 1}`);

// ---------------------------------------------------------------- the SQL

type Translation = { sql: string } | { error: string };

/** Stand-ins for string literals and quoted identifiers while the code around them is rewritten. */
const LITERAL = "\uE000";
const IDENTIFIER = "\uE001";

const SECONDS: Record<string, number> = { SECOND: 1, MINUTE: 60, HOUR: 3600, DAY: 86_400 };

/** A ClickHouse string literal's content (between the quotes), as the string it stands for. */
function unescapeClickHouse(raw: string): string {
  const escapes: Record<string, string> = { "\\": "\\", "'": "'", n: "\n", t: "\t", r: "\r", "0": "\0" };
  return raw.replace(/''|\\(.)/gs, (whole, escaped: string | undefined) => (escaped === undefined ? "'" : (escapes[escaped] ?? whole)));
}

/** The index of the parenthesis that closes the one at `open`, or -1. */
function closingParen(code: string, open: number): number {
  let depth = 0;
  for (let i = open; i < code.length; i++) {
    if (code[i] === "(") depth++;
    else if (code[i] === ")" && --depth === 0) return i;
  }
  return -1;
}

/** Every call `name(args)` (a name `names` matches) as `before + name(args) + after`, nested ones too; not a window function's (`OVER`). */
function wrapCalls(code: string, names: RegExp, before: string, after: string): string {
  const call = new RegExp(`\\b(?:${names.source})\\s*\\(`, "i").exec(code);
  if (!call) return code;
  const open = call.index + call[0].length - 1;
  const close = closingParen(code, open);
  if (close < 0) return code; // unbalanced: SQLite says so
  const rest = code.slice(close + 1);
  const [head, tail] = /^\s*OVER\b/i.test(rest) ? ["", ""] : [before, after];
  return (
    code.slice(0, call.index) +
    head +
    code.slice(call.index, open + 1) +
    wrapCalls(code.slice(open + 1, close), names, before, after) +
    `)${tail}` +
    wrapCalls(rest, names, before, after)
  );
}

/** An AE (ClickHouse) query as SQLite runs it, per the subset in this file's header; or why not. */
export function translateSql(text: string): Translation {
  if (text.includes(LITERAL) || text.includes(IDENTIFIER)) return { error: "the query holds a character this recorder reserves (U+E000, U+E001)" };
  // Literals, quoted identifiers and comments out of the way: only the code between them is rewritten.
  const literals: string[] = [];
  const identifiers: string[] = [];
  let code = "";
  for (let i = 0; i < text.length; ) {
    const c = text[i]!;
    if (c === "'") {
      let end = i + 1;
      while (end < text.length && text[end] !== "'") end += text[end] === "\\" ? 2 : 1;
      while (text[end + 1] === "'") {
        // '' inside a literal is a quote: the literal goes on.
        end += 2;
        while (end < text.length && text[end] !== "'") end += text[end] === "\\" ? 2 : 1;
      }
      if (end >= text.length) return { error: "a string literal is not closed" };
      code += `${LITERAL}${literals.push(unescapeClickHouse(text.slice(i + 1, end))) - 1}${LITERAL}`;
      i = end + 1;
    } else if (c === '"' || c === "`") {
      const end = text.indexOf(c, i + 1);
      if (end < 0) return { error: `a quoted identifier (${c}) is not closed` };
      code += `${IDENTIFIER}${identifiers.push(text.slice(i, end + 1)) - 1}${IDENTIFIER}`;
      i = end + 1;
    } else if (text.startsWith("--", i)) {
      const end = text.indexOf("\n", i);
      code += " ";
      i = end < 0 ? text.length : end + 1;
    } else if (text.startsWith("/*", i)) {
      const end = text.indexOf("*/", i + 2);
      if (end < 0) return { error: "a comment (/*) is not closed" };
      code += " ";
      i = end + 2;
    } else {
      code += c;
      i++;
    }
  }

  code = code.replace(/[\s;]+$/, "");
  const format = /\bFORMAT\s+(\w+)$/i.exec(code);
  if (!format) return { error: "the query must end with FORMAT JSON (the only output format this recorder answers, as the fleet asks AE for it)" };
  if (format[1]!.toUpperCase() !== "JSON") return { error: `FORMAT ${format[1]} is not answered here: only FORMAT JSON` };
  code = code.slice(0, format.index).replace(/[\s;]+$/, "");
  if (code.includes(";")) return { error: "one statement at a time" };
  if (!/^\s*(SELECT|WITH)\b/i.test(code)) return { error: "only SELECT queries are answered here" };

  code = code.replace(
    new RegExp(`\\bINTERVAL\\s+(?:${LITERAL}(\\d+)${LITERAL}|(\\d+))\\s+(SECOND|MINUTE|HOUR|DAY)S?\\b`, "gi"),
    (whole, literal: string | undefined, bare: string | undefined, unit: string) => {
      const count = literal === undefined ? bare : literals[Number(literal)]?.trim();
      return count !== undefined && /^\d+$/.test(count) ? String(Number(count) * SECONDS[unit.toUpperCase()]!) : whole;
    },
  );
  if (/\bINTERVAL\b/i.test(code)) return { error: "INTERVAL is understood here only as INTERVAL 'N' SECOND, MINUTE, HOUR or DAY (N a whole number)" };
  code = code.replace(/\bif(\s*\()/gi, "iif$1");
  code = wrapCalls(code, /toUInt32|intDiv/, "CAST(", " AS INTEGER)");
  code = wrapCalls(code, /sum/, "coalesce(", ", 0)");

  const sql = code
    .replace(new RegExp(`${LITERAL}(\\d+)${LITERAL}`, "g"), (_, n: string) => `'${literals[Number(n)]!.replaceAll("'", "''")}'`)
    .replace(new RegExp(`${IDENTIFIER}(\\d+)${IDENTIFIER}`, "g"), (_, n: string) => identifiers[Number(n)]!);
  return { sql };
}

/** A cell as sql.js reads it with `useBigInt`: SQLite's integers as bigint. */
type Cell = number | bigint | string | Uint8Array | null;

interface Answer {
  meta: { name: string; type: string }[];
  data: Record<string, number | string | null>[];
  rows: number;
  rows_before_limit_at_least: number;
}

const utf8 = new TextDecoder();

/** The rows as ClickHouse's FORMAT JSON writes them, each column's type read off its values. */
function formatJson(names: string[], rows: Cell[][]): Answer {
  const columns = names.map((name, column) => {
    let text = false;
    let real = false;
    let integer = false;
    let negative = false;
    let nullable = false;
    for (const row of rows) {
      const cell = row[column] ?? null;
      if (cell === null) nullable = true;
      else if (typeof cell === "bigint") {
        integer = true;
        if (cell < 0n) negative = true;
      } else if (typeof cell === "number") real = true;
      else text = true;
    }
    const kind: "String" | "Float64" | "Int64" | "UInt64" | "Nothing" = text
      ? "String"
      : real
        ? "Float64"
        : integer
          ? negative
            ? "Int64"
            : "UInt64"
          : "Nothing";
    const value = (cell: Cell): number | string | null => {
      if (cell === null) return null;
      if (cell instanceof Uint8Array) return utf8.decode(cell);
      if (kind === "String") return String(cell);
      if (kind === "Float64") return Number(cell);
      return String(cell); // a 64-bit integer: ClickHouse quotes them
    };
    return { name, type: nullable || kind === "Nothing" ? `Nullable(${kind})` : kind, value };
  });
  const data = rows.map((row) => Object.fromEntries(columns.map((column, i) => [column.name, column.value(row[i] ?? null)])));
  return { meta: columns.map(({ name, type }) => ({ name, type })), data, rows: data.length, rows_before_limit_at_least: data.length };
}

// ---------------------------------------------------------------- the points

/** Ids of stored points remembered against a repeated delivery: far more than a binding ever holds (10,000). */
const MAX_SEEN_IDS = 1_000_000;

interface Point {
  /** The binding's name for the point: a point delivered twice (its POST's answer lost) is stored once. */
  id?: string;
  dataset: string;
  /** ms since the epoch */
  timestamp: number;
  indexes: (string | null)[];
  blobs: (string | null)[];
  doubles: (number | null)[];
}

/** The batch's points, checked; or what is wrong with the first bad one. */
function parseBatch(body: unknown): { points: Point[]; dropped: number } | { error: string } {
  if (typeof body !== "object" || body === null || !Array.isArray((body as { points?: unknown }).points)) {
    return { error: "the body must be a JSON object { points: [...], dropped: n }" };
  }
  const { points, dropped = 0 } = body as { points: unknown[]; dropped?: unknown };
  if (typeof dropped !== "number" || !Number.isInteger(dropped) || dropped < 0) return { error: "dropped must be a whole number" };
  const strings = (value: unknown, max: number): value is (string | null)[] =>
    Array.isArray(value) && value.length <= max && value.every((item) => item === null || typeof item === "string");
  const checked: Point[] = [];
  for (const [i, point] of points.entries()) {
    const where = `points[${i}]`;
    if (typeof point !== "object" || point === null) return { error: `${where} is not an object` };
    const { id, dataset, timestamp, indexes = [], blobs = [], doubles = [] } = point as Record<string, unknown>;
    if (id !== undefined && (typeof id !== "string" || id.length === 0 || id.length > 64))
      return { error: `${where}.id must be a string of 1 to 64 characters` };
    if (typeof dataset !== "string" || !DATASET_NAME.test(dataset) || /^sqlite_/i.test(dataset)) {
      return { error: `${where}.dataset must be 1 to 64 letters, digits or _ (and not start sqlite_)` };
    }
    if (typeof timestamp !== "number" || !Number.isFinite(timestamp)) return { error: `${where}.timestamp must be a number (ms since the epoch)` };
    if (!strings(indexes, MAX_INDEXES)) return { error: `${where}.indexes must be at most ${MAX_INDEXES} string` };
    if (!strings(blobs, MAX_BLOBS)) return { error: `${where}.blobs must be at most ${MAX_BLOBS} strings or nulls` };
    // null: how JSON carries NaN and the infinities.
    if (!Array.isArray(doubles) || doubles.length > MAX_DOUBLES || !doubles.every((d) => d === null || typeof d === "number")) {
      return { error: `${where}.doubles must be at most ${MAX_DOUBLES} numbers` };
    }
    checked.push({ ...(id === undefined ? {} : { id }), dataset, timestamp, indexes, blobs, doubles: doubles as (number | null)[] });
  }
  return { points: checked, dropped };
}

const quoteIdentifier = (name: string) => `"${name}"`;

/** The SQLite side: the tables, their inserts, the bound, the queries. */
class Store {
  private readonly tables = new Map<string, { insert: SqlStatement; trim: SqlStatement }>();
  /**
   * Every row's rowid comes from this one sequence, across the tables, and rows only ever go oldest
   * first: so the rows held are exactly the rowids from `firstKept` to `nextRowid - 1`.
   */
  private nextRowid = 1;
  private firstKept = 1;
  private queryNow = 0;
  /** The ids of the points stored lately, oldest first (a Map keeps insertion order), at most MAX_SEEN_IDS. */
  private readonly seen = new Map<string, true>();
  batches = 0;
  /** Points delivered again (their id already stored) and not stored twice. */
  repeated = 0;
  dropped = 0;

  constructor(
    private readonly db: SqlDatabase,
    private readonly maxPoints: number,
  ) {
    db.create_function("now", () => this.queryNow);
    db.create_function("toUInt32", (x: number | null) => (x === null ? null : Math.floor(x)));
    db.create_function("intDiv", (a: number | null, b: number | null) => {
      if (a === null || b === null) return null;
      if (b === 0) throw new Error("intDiv: division by zero");
      return Math.floor(a / b);
    });
  }

  get size(): number {
    return this.nextRowid - this.firstKept;
  }

  private table(dataset: string) {
    let table = this.tables.get(dataset);
    if (!table) {
      const name = quoteIdentifier(dataset);
      const columns = [
        "dataset TEXT NOT NULL",
        "timestamp REAL NOT NULL",
        "_sample_interval INTEGER NOT NULL",
        "index1 TEXT NOT NULL",
        ...BLOB_COLUMNS.map((column) => `${column} TEXT NOT NULL`),
        ...DOUBLE_COLUMNS.map((column) => `${column} REAL NOT NULL`),
      ];
      this.db.run(`CREATE TABLE ${name} (${columns.join(", ")})`);
      // A space: no dataset's name has one, so no table's name is an index's.
      this.db.run(`CREATE INDEX ${quoteIdentifier(`${dataset} timestamp`)} ON ${name} (timestamp)`);
      const names = ["rowid", "dataset", "timestamp", "_sample_interval", "index1", ...BLOB_COLUMNS, ...DOUBLE_COLUMNS];
      table = {
        insert: this.db.prepare(`INSERT INTO ${name} (${names.join(", ")}) VALUES (${names.map(() => "?").join(", ")})`),
        trim: this.db.prepare(`DELETE FROM ${name} WHERE rowid < ?`),
      };
      this.tables.set(dataset, table);
    }
    return table;
  }

  /** Stores the batch in one transaction, then drops the oldest rows past the bound. */
  /** Returns how many of the points were new (a point whose id is already stored is not stored again). */
  add(points: Point[], dropped: number): number {
    // A batch larger than the bound keeps only its newest points.
    const fresh = points.filter((point) => point.id === undefined || !this.seen.has(point.id));
    this.repeated += points.length - fresh.length;
    const kept = fresh.length > this.maxPoints ? fresh.slice(fresh.length - this.maxPoints) : fresh;
    const { nextRowid, firstKept } = this;
    for (const point of kept) this.table(point.dataset); // DDL before the transaction
    this.db.run("BEGIN");
    try {
      for (const point of kept) {
        const blobs = BLOB_COLUMNS.map((_, i) => point.blobs[i] ?? "");
        const doubles = DOUBLE_COLUMNS.map((_, i) => point.doubles[i] ?? 0);
        this.table(point.dataset).insert.run([this.nextRowid++, point.dataset, point.timestamp / 1000, 1, point.indexes[0] ?? "", ...blobs, ...doubles]);
      }
      if (this.size > this.maxPoints) {
        this.firstKept = this.nextRowid - this.maxPoints;
        for (const { trim } of this.tables.values()) trim.run([this.firstKept]);
      }
      this.db.run("COMMIT");
    } catch (err) {
      this.db.run("ROLLBACK");
      Object.assign(this, { nextRowid, firstKept });
      throw err;
    }
    for (const point of kept) if (point.id !== undefined) this.seen.set(point.id, true);
    for (const id of this.seen.keys()) {
      if (this.seen.size <= MAX_SEEN_IDS) break;
      this.seen.delete(id);
    }
    this.batches++;
    this.dropped += dropped;
    return fresh.length;
  }

  /** Runs a translated query read-only; SQLite's error message when it cannot. */
  query(sql: string): Answer | { error: string } {
    this.queryNow = Date.now() / 1000;
    this.db.run("PRAGMA query_only = 1");
    let statement: SqlStatement | undefined;
    try {
      statement = this.db.prepare(sql);
      const names = statement.getColumnNames();
      const rows: Cell[][] = [];
      // @types/sql.js does not know get's second argument (sql.js ≥ 1.9): with it, INTEGER cells are bigints.
      const get = statement.get.bind(statement) as unknown as (params: null, config: { useBigInt: boolean }) => Cell[];
      while (statement.step()) rows.push(get(null, { useBigInt: true }));
      return formatJson(names, rows);
    } catch (err) {
      return { error: err instanceof Error ? err.message : String(err) };
    } finally {
      statement?.free();
      this.db.run("PRAGMA query_only = 0");
    }
  }
}

// ---------------------------------------------------------------- HTTP

function send(response: ServerResponse, status: number, body: string, type: string, close = false): void {
  const bytes = Buffer.from(body);
  response.writeHead(status, { "Content-Type": type, "Content-Length": String(bytes.length), ...(close ? { Connection: "close" } : {}) });
  response.end(bytes);
}
const sendJson = (response: ServerResponse, status: number, value: unknown) => send(response, status, JSON.stringify(value), "application/json");
const sendText = (response: ServerResponse, status: number, text: string) => send(response, status, `${text}\n`, "text/plain; charset=utf-8");
const tooLarge = (response: ServerResponse, max: number) =>
  send(response, 413, `${JSON.stringify({ error: `the body passes ${max} bytes` })}`, "application/json", true);

/** Starts the recorder on 127.0.0.1:`port` (0 or unset: one the OS picks). */
export async function startRecorder(options: RecorderOptions = {}): Promise<Recorder> {
  const maxPoints = options.maxPoints ?? DEFAULT_MAX_POINTS;
  if (!Number.isInteger(maxPoints) || maxPoints < 1) throw new Error(`maxPoints must be a whole number above 0, got ${maxPoints}`);
  // useOldExtensionFunctions: false: SQLite's own math functions (floor, ...), not sql.js's deprecated ones, which warn on use.
  const SQL = await initSqlJs({ useOldExtensionFunctions: false } as initSqlJs.SqlJsConfig);
  const db = new SQL.Database();
  const store = new Store(db, maxPoints);
  const authorized = options.token === undefined ? () => true : bearerCheck(options.token);

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const path = new URL(request.url ?? "/", "http://recorder").pathname;
    if (path === "/points") {
      if (request.method !== "POST") return sendJson(response, 405, { error: "POST the points" });
      const body = await readBodyUpTo(request, MAX_BODY_BYTES);
      if (!body) return tooLarge(response, MAX_BODY_BYTES);
      let parsed: unknown;
      try {
        parsed = JSON.parse(body.toString("utf8"));
      } catch {
        return sendJson(response, 400, { error: "the body is not JSON" });
      }
      const batch = parseBatch(parsed);
      if ("error" in batch) return sendJson(response, 400, { error: batch.error });
      const stored = store.add(batch.points, batch.dropped);
      return sendJson(response, 200, { stored, repeated: batch.points.length - stored });
    }
    if (SQL_PATH.test(path)) {
      if (request.method !== "POST") return sendText(response, 405, "POST the query");
      if (!authorized(request.headers.authorization)) {
        // Cloudflare's API answers a missing or wrong token with its JSON envelope.
        return sendJson(response, 401, { success: false, errors: [{ code: 10000, message: "Authentication error" }], messages: [], result: null });
      }
      const body = await readBodyUpTo(request, MAX_SQL_BYTES);
      if (!body) return tooLarge(response, MAX_SQL_BYTES);
      const translated = translateSql(body.toString("utf8"));
      if ("error" in translated) return sendText(response, 422, `Query not understood: ${translated.error}`);
      const answer = store.query(translated.sql);
      if ("error" in answer) return sendText(response, 422, `Query not understood: ${answer.error}\n(as run on SQLite: ${translated.sql})`);
      return sendJson(response, 200, answer);
    }
    if (path === "/" && request.method === "GET") {
      return sendJson(response, 200, { points: store.size, batches: store.batches, dropped: store.dropped, maxPoints });
    }
    return sendJson(response, 404, { error: "no such path: POST /points, or POST /client/v4/accounts/<id>/analytics_engine/sql" });
  }

  const server: Server = createServer((request, response) => {
    handle(request, response).catch((err: unknown) => {
      if (!response.headersSent) sendJson(response, 500, { error: err instanceof Error ? err.message : String(err) });
      else response.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, "127.0.0.1", () => resolve());
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  let closed: Promise<void> | undefined;
  return {
    url,
    pointsUrl: `${url}/points`,
    sqlUrl: `${url}/client/v4/accounts/local/analytics_engine/sql`,
    points: () => store.size,
    batches: () => store.batches,
    dropped: () => store.dropped,
    close: () =>
      (closed ??= new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => {
          db.close();
          resolve();
        });
      })),
  };
}
