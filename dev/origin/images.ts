// GET /images/{id}/{n}.svg, outside the contract: a placeholder that shows
// the id, so that pages have real image urls to load.
import { sValidator } from "@hono/standard-validator";
import { Hono } from "hono";
import * as v from "valibot";
import { errorBody, productId, type OriginEnv } from "./http";

const imageParams = v.object({ id: productId, file: v.pipe(v.string(), v.regex(/^[1-9]\.svg$/)) });

export function imageRoutes(): Hono<OriginEnv> {
  return new Hono<OriginEnv>().get(
    "/images/:id/:file",
    sValidator("param", imageParams, (result, c) => (result.success ? undefined : c.json(errorBody("not_found"), 404))),
    (c) => {
      const { id, file } = c.req.valid("param");
      const n = Number(file[0]);
      // Safe to embed: valid ids are [A-Za-z0-9_-] only.
      const hue = (n * 47 + id.length * 13 + (id.charCodeAt(id.length - 1) || 0) * 7) % 360;
      const svg =
        `<svg xmlns="http://www.w3.org/2000/svg" width="400" height="400" viewBox="0 0 400 400">` +
        `<rect width="400" height="400" fill="hsl(${hue},45%,55%)"/>` +
        `<text x="200" y="200" font-family="sans-serif" font-size="32" text-anchor="middle" fill="#fff">` +
        `${id} #${n}</text>` +
        `</svg>`;
      return c.body(svg, 200, { "content-type": "image/svg+xml", "cache-control": "public, max-age=86400" });
    },
  );
}
