import { writeFileSync } from "node:fs";
import { productFor, inventoryFor, reviewsFor, recommendationsFor } from "../dev/origin/catalog";
import { renderProductPage, renderHomePage, renderErrorPage } from "../src/render";
const O = "http://origin.test";
const out: string[] = [];
for (let i = 0; i < 300; i++) {
  const r = reviewsFor(i), rec = recommendationsFor(i, 100000, O);
  const states = [["ok", "ok"], ["none", "unavailable"], ["unavailable", "none"]][i % 3]!;
  out.push(renderProductPage({ product: productFor(i, O), inventory: i % 7 ? { state: "ok", data: inventoryFor(i) } : { state: "unavailable" }, reviews: r && states[0] === "ok" ? { state: "ok", data: r } : { state: states[0] === "ok" ? "none" : states[0] }, recommendations: rec && states[1] === "ok" ? { state: "ok", data: rec } : { state: states[1] === "ok" ? "none" : states[1] }, pageUrl: `https://shop.test/products/${i}` } as any));
}
out.push(renderHomePage({ products: [{ id: "p1", title: "<b>x</b>" }, { id: "p2", title: null }] }));
out.push(renderHomePage({ products: [] }));
for (const s of [400, 404, 405, 503, 500]) out.push(renderErrorPage({ status: s, message: "msg <x>", retryAfterSeconds: 3 }));
writeFileSync(process.argv[2]!, out.join("\n=====\n"));
