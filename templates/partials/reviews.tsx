import { html } from "hono/html";
import type { SectionViews } from "../../src/render/view";

// A loop over untrusted text, written as hono/html tagged templates rather
// than JSX: every interpolation is escaped the same way, and the markup
// around it is a constant string, where hono/jsx builds and walks a node per
// element (4-7× the CPU for this section and the recommendations', measured
// in one Node run). The props are typed as for any template.

/** The rating and the top reviews; without reviews, or without the service, a line that says which. */
export function Reviews({ reviews }: { reviews: SectionViews["reviews"] }) {
  if (reviews.state !== "ok") {
    const line = reviews.state === "none" ? "No reviews yet." : "Reviews are unavailable right now.";
    return html`<section class="reviews" aria-labelledby="reviews-heading"><h2 id="reviews-heading">Reviews</h2><p class="muted">${line}</p></section>`;
  }
  const top = reviews.top.map(
    (review) =>
      html`<li class="review"><h3>${review.title}</h3><p><span class="stars" aria-hidden="true">${review.stars}</span> <span class="visually-hidden">${review.ratingText}</span></p><p class="muted">By ${review.author}</p><p>${review.body}</p></li>`,
  );
  return html`<section class="reviews" aria-labelledby="reviews-heading"><h2 id="reviews-heading">Reviews</h2><p><span class="stars" aria-hidden="true">${reviews.stars}</span> <span>${reviews.ratingText}</span>, ${reviews.countText}</p>${top.length > 0 ? html`<ul>${top}</ul>` : ""}</section>`;
}
