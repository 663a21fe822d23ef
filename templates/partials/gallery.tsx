import { html } from "hono/html";
import type { ProductSummaryView } from "../../src/render/view";
import { IMAGE_SIZE } from "../layout";

// hono/html rather than JSX, as the reviews' partial says why.

/** The first image is the page's largest paint: fetched first; the thumbnails below the fold wait until they are near. */
export function Gallery({ gallery }: { gallery: ProductSummaryView["gallery"] }) {
  if (!gallery) return null;
  const { main, thumbs } = gallery;
  const list = thumbs.map(
    (image) => html`<li><img src="${image.url}" alt="${image.alt}" width="${IMAGE_SIZE}" height="${IMAGE_SIZE}" loading="lazy" decoding="async"/></li>`,
  );
  return html`<div class="gallery"><img src="${main.url}" alt="${main.alt}" width="${IMAGE_SIZE}" height="${IMAGE_SIZE}" fetchpriority="high" decoding="async"/>${list.length > 0 ? html`<ul class="thumbs">${list}</ul>` : ""}</div>`;
}
