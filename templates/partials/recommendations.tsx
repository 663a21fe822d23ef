import type { SectionViews } from "../../src/render/view";

/** Other products as links; no section at all when there are none. */
export function Recommendations({ items }: { items: SectionViews["recommendations"] }) {
  if (items.length === 0) return null;
  return (
    <section class="recommendations" aria-labelledby="recommendations-heading">
      <h2 id="recommendations-heading">You may also like</h2>
      <ul>
        {items.map((item) => (
          <li>
            <a href={item.href}>
              {item.image ? (
                <img src={item.image.url} alt={item.image.alt} width={item.image.width} height={item.image.height} loading="lazy" decoding="async" />
              ) : null}
              <span>{item.title}</span>
            </a>
            <p>
              <span class="visually-hidden">Price: </span>
              {item.price}
            </p>
          </li>
        ))}
      </ul>
    </section>
  );
}
