import { html } from "hono/html";

// hono/html rather than JSX, as the reviews' partial says why.

export function Breadcrumb({ crumbs, current }: { crumbs: string[]; current: string }) {
  const middle = crumbs.map((crumb) => html`<li>${crumb}</li>`);
  return html`<nav class="breadcrumb" aria-label="Breadcrumb"><ol><li><a href="/">All products</a></li>${middle}<li aria-current="page">${current}</li></ol></nav>`;
}
