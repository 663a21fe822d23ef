import { productFor, inventoryFor, reviewsFor, recommendationsFor } from "../dev/origin/catalog";
import { renderProductPage } from "../src/render";
import { productView } from "../src/render/view";
import { ProductPage } from "../templates/product";
const O = "http://origin.test";
const models = Array.from({ length: 200 }, (_, i) => {
  const r = reviewsFor(i), rec = recommendationsFor(i, 100000, O);
  return { product: productFor(i, O), inventory: { state: "ok", data: inventoryFor(i) }, reviews: r ? { state: "ok", data: r } : { state: "none" }, recommendations: rec ? { state: "ok", data: rec } : { state: "none" }, pageUrl: `https://shop.test/products/${i}` } as any;
});
function bench(name: string, fn: (m: any) => unknown) {
  for (let k = 0; k < 20; k++) for (const m of models) fn(m);
  const rounds = [];
  for (let r = 0; r < 5; r++) { const t = performance.now(); for (let k = 0; k < 20; k++) for (const m of models) fn(m); rounds.push(((performance.now() - t) * 1000) / (20 * models.length)); }
  rounds.sort((a, b) => a - b);
  console.log(name, rounds.map((x) => x.toFixed(1)).join(" "), "us; median", rounds[2].toFixed(1));
}
const views = models.map(productView);
let vi = 0;
bench("view", (m) => productView(m));
bench("templates", () => String(ProductPage(views[vi++ % views.length])));
bench("whole", (m) => renderProductPage(m));
console.log("bytes", renderProductPage(models[3]).length);
