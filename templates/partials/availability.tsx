import { html } from "hono/html";
import type { SectionViews } from "../../src/render/view";

// hono/html rather than JSX, as the reviews' partial says why.

/** What the page promises about stock (unknown stock is never shown as in stock: format.ts). */
export function AvailabilityNote({ availability }: { availability: SectionViews["inventory"] }) {
  return html`<p class="availability availability--${availability.state}"><span class="visually-hidden">Availability: </span>${availability.text}</p>`;
}
