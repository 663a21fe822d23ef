import { html } from "hono/html";
import type { SectionViews } from "../../src/render/view";
import { IMAGE_SIZE } from "../layout";

// hono/html rather than JSX, as the reviews' partial says why.

/** Other products as links; no section at all when there are none. */
export function Recommendations({ items }: { items: SectionViews["recommendations"] }) {
  if (items.length === 0) return null;
  const links = items.map((item) => {
    const image = item.image
      ? html`<img src="${item.image.url}" alt="${item.image.alt}" width="${IMAGE_SIZE}" height="${IMAGE_SIZE}" loading="lazy" decoding="async"/>`
      : "";
    return html`<li><a href="${item.href}">${image}<span>${item.title}</span></a><p><span class="visually-hidden">Price: </span>${item.price}</p></li>`;
  });
  return html`<section class="recommendations" aria-labelledby="recommendations-heading"><h2 id="recommendations-heading">You may also like</h2><ul>${links}</ul></section>`;
}
