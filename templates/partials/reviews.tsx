import type { SectionViews } from "../../src/render/view";

/** The rating and the top reviews; without reviews, or without the service, a line that says which. */
export function Reviews({ reviews }: { reviews: SectionViews["reviews"] }) {
  return (
    <section class="reviews" aria-labelledby="reviews-heading">
      <h2 id="reviews-heading">Reviews</h2>
      {reviews.state === "ok" ? (
        <>
          <p>
            <span class="stars" aria-hidden="true">
              {reviews.stars}
            </span>{" "}
            <span>{reviews.ratingText}</span>, {reviews.countText}
          </p>
          {reviews.top.length > 0 ? (
            <ul>
              {reviews.top.map((review) => (
                <li class="review">
                  <h3>{review.title}</h3>
                  <p>
                    <span class="stars" aria-hidden="true">
                      {review.stars}
                    </span>{" "}
                    <span class="visually-hidden">{review.ratingText}</span>
                  </p>
                  <p class="muted">By {review.author}</p>
                  <p>{review.body}</p>
                </li>
              ))}
            </ul>
          ) : null}
        </>
      ) : reviews.state === "none" ? (
        <p class="muted">No reviews yet.</p>
      ) : (
        <p class="muted">Reviews are unavailable right now.</p>
      )}
    </section>
  );
}
