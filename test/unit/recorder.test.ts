/**
 * The local Analytics Engine stand-in (dev/fleet/recorder.ts): points in over
 * HTTP, AE's SQL (the subset the fleet's queries use) out as ClickHouse's
 * FORMAT JSON; and the binding's stand-in (dev/fleet/recorderBinding.js) run
 * in Node, its batching against a real recorder.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { type Recorder, startRecorder, translateSql } from "../../dev/fleet/recorder";

const TOKEN = "recorder-test-token";
const DATASET = "edge_product_pages";

interface DataPoint {
  indexes?: unknown[];
  blobs?: unknown[];
  doubles?: unknown[];
}
interface Binding {
  writeDataPoint(point?: DataPoint): { deliver(): Promise<void> | undefined } | undefined;
}
type MakeBinding = (env: { url: string; dataset: string }) => Binding;

let recorder: Recorder;
let makeBinding: MakeBinding;

/** A write by a caller that keeps work alive (as fleet.ts does with waitUntil): the flush it started, if it could start one. */
function writeAndDeliver(binding: Binding, point: DataPoint): Promise<void> | undefined {
  return binding.writeDataPoint(point)?.deliver();
}

beforeAll(async () => {
  recorder = await startRecorder({ port: 0, token: TOKEN });
  // Plain JS with no declarations (workerd loads it as it is): imported by address, typed here.
  const module = (await import(new URL("../../dev/fleet/recorderBinding.js", import.meta.url).href)) as { default: MakeBinding };
  makeBinding = module.default;
});

afterAll(async () => {
  await recorder?.close();
});

async function postPoints(target: Recorder, body: unknown): Promise<{ status: number; body: any }> {
  const response = await fetch(target.pointsUrl, { method: "POST", body: typeof body === "string" ? body : JSON.stringify(body) });
  return { status: response.status, body: await response.json() };
}

/** A query to the SQL API; token null: no Authorization header. */
async function query(text: string, token: string | null = TOKEN, target = recorder): Promise<Response> {
  return fetch(target.sqlUrl, { method: "POST", body: text, headers: token === null ? {} : { Authorization: `Bearer ${token}` } });
}

async function rows(text: string, target = recorder): Promise<{ meta: { name: string; type: string }[]; data: Record<string, any>[]; rows: number }> {
  const response = await query(text, TOKEN, target);
  expect(response.status, await response.clone().text()).toBe(200);
  return response.json();
}

const point = (dataset: string, timestamp: number, index: string, blobs: (string | null)[], doubles: number[]) => ({
  dataset,
  timestamp,
  indexes: [index],
  blobs,
  doubles,
});

describe("translateSql: AE's SQL as SQLite runs it", () => {
  const sql = (text: string) => {
    const translated = translateSql(text);
    if ("error" in translated) throw new Error(translated.error);
    return translated.sql;
  };

  it("takes off FORMAT JSON, in any case, and a trailing semicolon", () => {
    expect(sql("SELECT 1 FORMAT JSON")).toBe("SELECT 1");
    expect(sql("select 1 format json;\n")).toBe("select 1");
  });

  it("refuses a query without FORMAT JSON, with another FORMAT, with two statements, or that is no SELECT", () => {
    expect(translateSql("SELECT 1")).toEqual({ error: expect.stringContaining("FORMAT JSON") });
    expect(translateSql("SELECT 1 FORMAT CSV")).toEqual({ error: expect.stringContaining("FORMAT CSV") });
    expect(translateSql("SELECT 1; SELECT 2 FORMAT JSON")).toEqual({ error: "one statement at a time" });
    expect(translateSql("DELETE FROM x FORMAT JSON")).toEqual({ error: expect.stringContaining("SELECT") });
  });

  it("turns INTERVAL 'N' UNIT into seconds, quoted or not, singular or plural", () => {
    expect(sql("SELECT NOW() - INTERVAL '1' HOUR FORMAT JSON")).toBe("SELECT NOW() - 3600");
    expect(sql("SELECT INTERVAL 5 minutes, interval '2' DAY, INTERVAL '30' SECOND FORMAT JSON")).toBe("SELECT 300, 172800, 30");
    expect(translateSql("SELECT INTERVAL '1' MONTH FORMAT JSON")).toEqual({ error: expect.stringContaining("INTERVAL") });
  });

  it("calls iif for if(, makes toUInt32 and intDiv integers, and SUM over nothing 0; not inside literals or quoted names", () => {
    expect(sql("SELECT SUM(IF(blob4 = 'if(x)', double1, 0)) AS ok FORMAT JSON")).toBe("SELECT coalesce(SUM(iif(blob4 = 'if(x)', double1, 0)), 0) AS ok");
    expect(sql("SELECT intDiv(toUInt32(timestamp), 60) * 60 AS minute FORMAT JSON")).toBe(
      "SELECT CAST(intDiv(CAST(toUInt32(timestamp) AS INTEGER), 60) AS INTEGER) * 60 AS minute",
    );
    expect(sql('SELECT "if"(1), countIf(x) FORMAT JSON')).toBe('SELECT "if"(1), countIf(x)');
  });

  it("reads ClickHouse's string escapes and writes SQLite's", () => {
    expect(sql("SELECT 'it''s', 'a\\'b', 'c\\\\d' FORMAT JSON")).toBe("SELECT 'it''s', 'a''b', 'c\\d'");
    expect(translateSql("SELECT 'open FORMAT JSON")).toEqual({ error: expect.stringContaining("not closed") });
  });

  it("drops comments", () => {
    expect(sql("SELECT 1 -- if(\n/* INTERVAL */ FORMAT JSON")).toBe("SELECT 1");
  });
});

describe("the recorder", () => {
  const now = Date.now();
  // The start of a minute ten minutes ago, in ms.
  const minute = Math.floor(now / 60_000) * 60_000 - 10 * 60_000;

  beforeAll(async () => {
    const stored = await postPoints(recorder, {
      points: [
        point(DATASET, minute + 1_000, "p1", ["GET", "", "", "ok"], [1]),
        point(DATASET, minute + 59_000, "p1", ["GET", "", "", "error"], [2]),
        point(DATASET, minute + 61_000, "p2", ["GET", null, "", "ok"], [4.5]),
        // Two hours ago: outside the last hour.
        point(DATASET, now - 2 * 3_600_000, "p1", ["GET", "", "", "ok"], [100]),
      ],
      dropped: 3,
    });
    expect(stored).toEqual({ status: 200, body: { stored: 4, repeated: 0 } });
  });

  it("answers the pages query as AE does, as ClickHouse's FORMAT JSON", async () => {
    const answer = await rows(
      `SELECT index1, SUM(_sample_interval * double1) AS pages, SUM(IF(blob4 = 'ok', double1, 0)) AS ok
       FROM ${DATASET} WHERE timestamp > NOW() - INTERVAL '1' HOUR GROUP BY index1 ORDER BY index1 FORMAT JSON`,
    );
    expect(answer.meta).toEqual([
      { name: "index1", type: "String" },
      { name: "pages", type: "Float64" },
      { name: "ok", type: "Float64" },
    ]);
    expect(answer.data).toEqual([
      { index1: "p1", pages: 3, ok: 1 },
      { index1: "p2", pages: 4.5, ok: 4.5 },
    ]);
    expect(answer).toMatchObject({ rows: 2, rows_before_limit_at_least: 2 });
  });

  it("counts per minute with intDiv(toUInt32(timestamp), 60) * 60 and count(), integers written as strings as ClickHouse writes UInt64", async () => {
    const answer = await rows(
      `SELECT intDiv(toUInt32(timestamp), 60) * 60 AS minute, count(), SUM(_sample_interval) AS points
       FROM ${DATASET} WHERE timestamp > NOW() - INTERVAL '1' HOUR GROUP BY minute ORDER BY minute FORMAT JSON`,
    );
    expect(answer.meta).toEqual([
      { name: "minute", type: "UInt64" },
      { name: "count()", type: "UInt64" },
      { name: "points", type: "UInt64" },
    ]);
    const start = minute / 1000;
    expect(answer.data).toEqual([
      { minute: String(start), "count()": "2", points: "2" },
      { minute: String(start + 60), "count()": "1", points: "1" },
    ]);
  });

  it("stores what a point did not write as AE does: '' and 0; timestamps in seconds; _sample_interval 1", async () => {
    const answer = await rows(
      `SELECT index1, blob2, blob20, double2, double20, _sample_interval AS si, timestamp, dataset FROM ${DATASET} WHERE index1 = 'p2' FORMAT JSON`,
    );
    expect(answer.data).toEqual([
      { index1: "p2", blob2: "", blob20: "", double2: 0, double20: 0, si: "1", timestamp: (minute + 61_000) / 1000, dataset: DATASET },
    ]);
  });

  it("takes a point that wrote no indexes, blobs or doubles at all", async () => {
    expect(await postPoints(recorder, { points: [{ dataset: "bare", timestamp: now }] })).toEqual({ status: 200, body: { stored: 1, repeated: 0 } });
    expect((await rows("SELECT index1, blob1, double1 FROM bare FORMAT JSON")).data).toEqual([{ index1: "", blob1: "", double1: 0 }]);
  });

  it("stores a point delivered twice (its first answer lost) once, by its id", async () => {
    const twice = [{ id: "abc-1", dataset: "again", timestamp: now, indexes: ["page"], blobs: ["x"], doubles: [1] }];
    expect(await postPoints(recorder, { points: twice })).toEqual({ status: 200, body: { stored: 1, repeated: 0 } });
    const more = [...twice, { ...twice[0]!, id: "abc-2" }];
    expect(await postPoints(recorder, { points: more })).toEqual({ status: 200, body: { stored: 1, repeated: 1 } });
    expect((await rows("SELECT count() AS n FROM again FORMAT JSON")).data).toEqual([{ n: "2" }]);
  });

  it("counts what the bindings reported dropped, and answers its counts on GET /", async () => {
    expect(recorder.dropped()).toBeGreaterThanOrEqual(3);
    const response = await fetch(recorder.url);
    expect(await response.json()).toMatchObject({ points: recorder.points(), batches: recorder.batches() });
  });

  it("wants the token: 401 without it or with another", async () => {
    const text = `SELECT count() FROM ${DATASET} FORMAT JSON`;
    expect((await query(text, null)).status).toBe(401);
    const wrong = await query(text, "not-the-token");
    expect(wrong.status).toBe(401);
    expect(await wrong.json()).toMatchObject({ success: false });
    expect((await query(text)).status).toBe(200);
  });

  it("answers a query it cannot run with a 422 whose text names what was not understood", async () => {
    const unknown = await query(`SELECT toStartOfInterval(timestamp, 60) AS t FROM ${DATASET} FORMAT JSON`);
    expect(unknown.status).toBe(422);
    expect(unknown.headers.get("content-type")).toMatch(/^text\/plain/);
    expect(await unknown.text()).toContain("no such function: toStartOfInterval");

    const noFormat = await query(`SELECT count() FROM ${DATASET}`);
    expect(noFormat.status).toBe(422);
    expect(await noFormat.text()).toContain("FORMAT JSON");

    const otherFormat = await query(`SELECT count() FROM ${DATASET} FORMAT JSONEachRow`);
    expect(otherFormat.status).toBe(422);

    const noDataset = await query("SELECT count() FROM never_written FORMAT JSON");
    expect(noDataset.status).toBe(422);
    expect(await noDataset.text()).toContain("never_written");
  });

  it("runs queries read-only", async () => {
    const before = recorder.points();
    const response = await query(`WITH x AS (SELECT 1) DELETE FROM ${DATASET} FORMAT JSON`);
    expect(response.status).toBe(422);
    expect(recorder.points()).toBe(before);
  });

  it("refuses malformed points with a 400 and a JSON error, storing nothing of that batch", async () => {
    const before = recorder.points();
    const good = point(DATASET, now, "p9", [], [1]);
    const bad = [
      "not json",
      { nopoints: [] },
      { points: [good, { ...good, dataset: "no-dashes" }] },
      { points: [good, { ...good, dataset: "" }] },
      { points: [good, { ...good, indexes: ["a", "b"] }] },
      { points: [good, { ...good, blobs: Array.from({ length: 21 }, () => "b") }] },
      { points: [good, { ...good, doubles: ["1"] }] },
      { points: [good, { ...good, timestamp: "now" }] },
      { points: [good], dropped: -1 },
    ];
    for (const body of bad) {
      const answer = await postPoints(recorder, body);
      expect(answer.status, JSON.stringify(body)).toBe(400);
      expect(answer.body.error).toEqual(expect.any(String));
    }
    expect(recorder.points()).toBe(before);
  });

  it("refuses a body past 16 MB with a 413", async () => {
    const blob = "x".repeat(4096);
    const points = Array.from({ length: 4200 }, () => point(DATASET, now, "big", [blob], []));
    const response = await fetch(recorder.pointsUrl, { method: "POST", body: JSON.stringify({ points }) });
    expect(response.status).toBe(413);
  });
});

describe("the recorder's bound", () => {
  let small: Recorder;
  beforeAll(async () => {
    small = await startRecorder({ maxPoints: 5 });
  });
  afterAll(async () => {
    await small?.close();
  });

  const values = async (dataset: string) =>
    (await rows(`SELECT double1 FROM ${dataset} ORDER BY double1 FORMAT JSON`, small)).data.map((row) => row.double1 as number);

  it("keeps at most maxPoints rows in all the datasets, dropping the oldest", async () => {
    const at = Date.now();
    await postPoints(small, { points: [1, 2, 3].map((n) => point("a", at, "", [], [n])) });
    expect(small.points()).toBe(3);
    await postPoints(small, { points: [point("b", at, "", [], [4]), point("b", at, "", [], [5]), point("a", at, "", [], [6]), point("a", at, "", [], [7])] });
    expect(small.points()).toBe(5);
    expect(await values("a")).toEqual([3, 6, 7]);
    expect(await values("b")).toEqual([4, 5]);
    // A batch larger than the bound: its newest points only.
    await postPoints(small, { points: [10, 11, 12, 13, 14, 15, 16, 17].map((n) => point("b", at, "", [], [n])) });
    expect(small.points()).toBe(5);
    expect(await values("a")).toEqual([]);
    expect(await values("b")).toEqual([13, 14, 15, 16, 17]);
  });
});

describe("recorderBinding.js, run in Node", () => {
  it("sends the writes of one flush in one batch, started by the first writer that keeps it alive", async () => {
    const binding = makeBinding({ url: recorder.pointsUrl, dataset: "binding_batch" });
    const batches = recorder.batches();
    const before = Date.now();
    // A write by a caller that cannot keep work alive only buffers its point.
    expect(typeof binding.writeDataPoint({ indexes: ["i1"], blobs: ["a", null], doubles: [1] })?.deliver).toBe("function");
    const first = writeAndDeliver(binding, { indexes: ["i2"], blobs: ["a"], doubles: [2] });
    expect(first).toBeInstanceOf(Promise);
    // While its flush is under way, the others' points go with it: no delivery is offered.
    const others = [3, 4, 5].map((n) => binding.writeDataPoint({ indexes: [`i${n}`], blobs: ["a"], doubles: [n] }));
    expect(others).toEqual([undefined, undefined, undefined]);
    // Nothing is sent before the flush's wait ends.
    expect(recorder.batches()).toBe(batches);
    await first;
    expect(recorder.batches()).toBe(batches + 1);
    const answer = await rows("SELECT index1, blob1, blob2, double1, timestamp FROM binding_batch ORDER BY double1 FORMAT JSON");
    expect(answer.data.map((row) => row.double1)).toEqual([1, 2, 3, 4, 5]);
    expect(answer.data[0]).toMatchObject({ index1: "i1", blob1: "a", blob2: "" });
    for (const row of answer.data) {
      expect(row.timestamp * 1000).toBeGreaterThanOrEqual(before);
      expect(row.timestamp * 1000).toBeLessThanOrEqual(Date.now());
    }
    // The flush is over: the next write starts another.
    const next = writeAndDeliver(binding, { doubles: [6] });
    expect(next).toBeInstanceOf(Promise);
    await next;
    expect(recorder.batches()).toBe(batches + 2);
  });

  it("keeps the points of a flush that never finished (its request cancelled) for the next one after its lease", async () => {
    const binding = makeBinding({ url: recorder.pointsUrl, dataset: "binding_lease" });
    // Started, and never awaited nor finished: as a flush whose request workerd cancelled (its timers never fire).
    vi.useFakeTimers({ toFake: ["setTimeout"] });
    try {
      expect(writeAndDeliver(binding, { doubles: [1] })).toBeInstanceOf(Promise);
    } finally {
      vi.useRealTimers();
    }
    // Within the lease nobody starts another; past it the next caller does, and it carries the first point too.
    expect(binding.writeDataPoint({ doubles: [2] })).toBeUndefined();
    await new Promise((resolve) => setTimeout(resolve, 2100));
    await writeAndDeliver(binding, { doubles: [3] });
    expect((await rows("SELECT double1 FROM binding_lease ORDER BY double1 FORMAT JSON")).data).toEqual([{ double1: 1 }, { double1: 2 }, { double1: 3 }]);
  });

  it("throws where AE would: too many indexes, blobs or doubles, or the wrong types", () => {
    const binding = makeBinding({ url: recorder.pointsUrl, dataset: "binding_checks" });
    expect(() => binding.writeDataPoint({ indexes: ["a", "b"] })).toThrow(TypeError);
    expect(() => binding.writeDataPoint({ blobs: Array.from({ length: 21 }, () => "b") })).toThrow(TypeError);
    expect(() => binding.writeDataPoint({ doubles: Array.from({ length: 21 }, () => 1) })).toThrow(TypeError);
    expect(() => binding.writeDataPoint({ doubles: ["1"] })).toThrow(TypeError);
    expect(() => binding.writeDataPoint({ blobs: [1] })).toThrow(TypeError);
  });

  it("keeps the points while the recorder is away, and sends them once it is back; the promise never rejects", async () => {
    const away = await startRecorder({});
    const port = Number(new URL(away.url).port);
    await away.close();
    const binding = makeBinding({ url: away.pointsUrl, dataset: "binding_retry" });
    await expect(writeAndDeliver(binding, { doubles: [1] })).resolves.toBeUndefined();
    const back = await startRecorder({ port });
    try {
      await writeAndDeliver(binding, { doubles: [2] });
      expect(back.batches()).toBe(1);
      expect((await rows("SELECT double1 FROM binding_retry ORDER BY double1 FORMAT JSON", back)).data).toEqual([{ double1: 1 }, { double1: 2 }]);
    } finally {
      await back.close();
    }
  });

  it("drops a batch the recorder refuses, and says so with the next one", async () => {
    const target = await startRecorder({});
    try {
      const refused = makeBinding({ url: target.pointsUrl, dataset: "not-a-name" });
      await writeAndDeliver(refused, { doubles: [1] });
      expect(target.batches()).toBe(0);
      const good = makeBinding({ url: target.pointsUrl, dataset: "binding_good" });
      await writeAndDeliver(good, { doubles: [2] });
      expect(target.batches()).toBe(1);
      expect(target.points()).toBe(1);
      expect(target.dropped()).toBe(1);
    } finally {
      await target.close();
    }
  });
});
