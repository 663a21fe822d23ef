// A template that fails must not take every HTML route down: the error page
// has a fallback that no template, data or engine can break, and the failure
// is logged once with its cause (issue: "A template that fails").
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { Hono } from "hono";
import { errorPage } from "../../src/http/errorPage";
import { renderErrorPage } from "../../src/render";
import { ErrorPage } from "../../templates/error";

vi.mock("../../src/render", async (importOriginal) => {
  const actual = await importOriginal<typeof import("../../src/render")>();
  return { ...actual, renderErrorPage: vi.fn(actual.renderErrorPage) };
});
const renders = vi.mocked(renderErrorPage);
// The generic error page's component, for a failure inside the real render (the view, then the template).
vi.mock("../../templates/error", async (importOriginal) => {
  const actual = await importOriginal<typeof import("../../templates/error")>();
  return { ...actual, ErrorPage: vi.fn(actual.ErrorPage) };
});
const errorTemplate = vi.mocked(ErrorPage);

let errors: ReturnType<typeof vi.spyOn>;
beforeEach(() => {
  errors = vi.spyOn(console, "error").mockImplementation(() => undefined);
});
afterEach(() => {
  errors.mockRestore();
  renders.mockReset();
  errorTemplate.mockReset();
});

describe("error pages", () => {
  it("renders the template when it works", async () => {
    const app = new Hono().get("/x", (c) => errorPage(c, 404, "We could not find that product.", "public, max-age=10"));
    const response = await app.request("/x");
    expect(response.status).toBe(404);
    expect(await response.text()).toContain("We could not find that product.");
    expect(response.headers.get("retry-after")).toBeNull();
  });

  it("gives a page that asks to come back later the Retry-After header of the same seconds", async () => {
    const app = new Hono().get("/x", (c) => errorPage(c, 503, "Busy.", "no-store", { retryAfterSeconds: 7 }));
    const response = await app.request("/x");
    expect(response.status).toBe(503);
    expect(response.headers.get("retry-after")).toBe("7");
    expect(await response.text()).toContain("7 seconds");
  });

  it("falls back to a static page when the template throws: the status, a readable message, no stack; the cause logged once", async () => {
    renders.mockImplementation(() => {
      throw new Error("render: unexpected view at templates/layout.tsx:12");
    });
    const app = new Hono().get("/x", (c) => errorPage(c, 500, "Something went wrong on our side.", "no-store"));
    for (let i = 0; i < 3; i++) {
      const response = await app.request("/x");
      expect(response.status).toBe(500);
      expect(response.headers.get("content-type")).toMatch(/^text\/html/);
      expect(response.headers.get("cache-control")).toBe("no-store");
      const html = await response.text();
      expect(html).toContain("Something went wrong on our side.");
      expect(html).toContain('<a href="/">');
      expect(html).not.toMatch(/render:|templates\/|at .*\.js|Error:/);
    }
    const logged = errors.mock.calls.map((call) => String(call[0])).filter((line) => line.includes('"event":"render_failed"'));
    expect(logged).toHaveLength(1);
    expect(logged[0]).toContain("unexpected view at templates/layout.tsx:12");
  });

  it("falls back to the static page when a template component throws while rendering", async () => {
    errorTemplate.mockImplementation(() => {
      throw new TypeError("Cannot read properties of null (reading 'title')");
    });
    const app = new Hono().get("/x", (c) => errorPage(c, 500, "Something went wrong on our side.", "no-store"));
    const response = await app.request("/x");
    expect(errorTemplate).toHaveBeenCalled();
    expect(response.status).toBe(500);
    const html = await response.text();
    expect(html).toContain("Something went wrong on our side.");
    expect(html).toContain("<p>Error 500</p>");
    expect(html).not.toMatch(/TypeError|reading 'title'/);
    const logged = errors.mock.calls.map((call) => String(call[0])).filter((line) => line.includes("reading 'title'"));
    expect(logged).toHaveLength(1);
    expect(logged[0]).toContain('"event":"render_failed"');
  });
});
