/**
 * The benchmarks' data-center cache (dev/harness/locationServer.ts) over
 * HTTP, as workerd's Cache API calls reach it: a put is a PUT of the response
 * serialised as HTTP/1.1, a match a GET answered HIT or MISS, a delete a
 * PURGE. Through workerd: test/integration/location-server.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { lifetimeMs, startLocationServer, type LocationServer } from "../../dev/harness/locationServer";

let server: LocationServer;

beforeAll(async () => {
  server = await startLocationServer({ maxBytes: 4096 });
});

afterAll(async () => {
  await server?.close();
});

const url = (path: string) => `http://${server.address}${path}`;

/** A put as workerd makes it. */
async function put(path: string, headers: Record<string, string>, body: string, namespace?: string): Promise<number> {
  const message = `HTTP/1.1 200 OK\r\n${Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join("")}\r\n${body}`;
  const response = await fetch(url(path), { method: "PUT", body: message, headers: namespace ? { "cf-cache-namespace": namespace } : {} });
  await response.arrayBuffer();
  return response.status;
}

async function match(path: string, namespace?: string): Promise<{ status: string | null; body: string; headers: Headers }> {
  const response = await fetch(url(path), { headers: namespace ? { "cf-cache-namespace": namespace } : {} });
  return { status: response.headers.get("cf-cache-status"), body: await response.text(), headers: response.headers };
}

describe("the location server", () => {
  it("gives back what was put, headers and body, as a HIT; a key never put is a MISS", async () => {
    expect(await put("/a", { "Cache-Control": "public, max-age=60", "pp-purge-stamp": "e1|7" }, "the copy")).toBe(204);
    const hit = await match("/a");
    expect(hit).toMatchObject({ status: "HIT", body: "the copy" });
    expect(hit.headers.get("pp-purge-stamp")).toBe("e1|7");
    expect(hit.headers.get("age")).toBe("0");
    expect((await match("/never")).status).toBe("MISS");
  });

  it("keeps the named caches apart from the default one", async () => {
    expect(await put("/b", { "Cache-Control": "max-age=60" }, "named", "pp-location")).toBe(204);
    expect((await match("/b")).status).toBe("MISS");
    expect(await match("/b", "pp-location")).toMatchObject({ status: "HIT", body: "named" });
  });

  it("refuses what a shared cache may not keep, and keeps nothing of it", async () => {
    const refused: Record<string, string>[] = [
      { "Cache-Control": "private, max-age=60" },
      { "Cache-Control": "no-store" },
      {},
      { "Cache-Control": "max-age=60", "Set-Cookie": "a=b" },
    ];
    for (const headers of refused) {
      expect(await put("/refused", headers, "no")).toBe(413);
    }
    expect((await match("/refused")).status).toBe("MISS");
  });

  it("forgets a copy past its lifetime", async () => {
    expect(await put("/short", { "Cache-Control": "max-age=1" }, "brief")).toBe(204);
    expect((await match("/short")).status).toBe("HIT");
    await new Promise((resolve) => setTimeout(resolve, 1100));
    expect((await match("/short")).status).toBe("MISS");
  });

  it("deletes on PURGE: 200, then 404 for a copy it no longer has", async () => {
    expect(await put("/gone", { "Cache-Control": "max-age=60" }, "x")).toBe(204);
    expect((await fetch(url("/gone"), { method: "PURGE" })).status).toBe(200);
    expect((await fetch(url("/gone"), { method: "PURGE" })).status).toBe(404);
    expect((await match("/gone")).status).toBe("MISS");
  });

  it("holds at most its bytes, the least recently used out first", async () => {
    const body = "x".repeat(1500);
    for (const path of ["/1", "/2"]) expect(await put(path, { "Cache-Control": "max-age=60" }, body)).toBe(204);
    expect((await match("/1")).status).toBe("HIT");
    expect(await put("/3", { "Cache-Control": "max-age=60" }, body)).toBe(204);
    expect((await match("/2")).status).toBe("MISS");
    expect((await match("/1")).status).toBe("HIT");
    expect(server.stats().bytes).toBeLessThanOrEqual(4096);
  });

  it("reads a lifetime as a shared cache does: s-maxage first, then max-age, then Expires", () => {
    const now = Date.parse("2026-11-27T00:00:00Z");
    expect(lifetimeMs([["Cache-Control", "max-age=10, s-maxage=30"]], now)).toBe(30_000);
    expect(lifetimeMs([["cache-control", "public, max-age=10"]], now)).toBe(10_000);
    expect(lifetimeMs([["Expires", "Fri, 27 Nov 2026 00:00:05 GMT"]], now)).toBe(5_000);
    expect(lifetimeMs([["Cache-Control", "max-age=0"]], now)).toBeUndefined();
    expect(
      lifetimeMs(
        [
          ["Cache-Control", "max-age=10"],
          ["Vary", "*"],
        ],
        now,
      ),
    ).toBeUndefined();
  });
});
