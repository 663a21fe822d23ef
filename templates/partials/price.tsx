import { html } from "hono/html";
import type { ProductSummaryView } from "../../src/render/view";

// hono/html rather than JSX, as the reviews' partial says why.

/** The price, and on sale the price it was and the discount; each figure labelled for screen readers. */
export function Price({ price }: { price: ProductSummaryView["price"] }) {
  const { now, sale } = price;
  const figures = sale
    ? html`<span class="visually-hidden">Was</span><s class="price-was">${sale.was}</s><span class="visually-hidden">, now</span><span class="price-now price-sale">${now}</span><span class="discount">Save ${sale.percentOff}%</span>`
    : html`<span class="visually-hidden">Price:</span><span class="price-now">${now}</span>`;
  return html`<p class="price">${figures}</p>`;
}
