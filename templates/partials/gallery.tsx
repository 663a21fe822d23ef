import type { ProductSummaryView } from "../../src/render/view";

/** The first image is the page's largest paint: fetched first; the thumbnails below the fold wait until they are near. */
export function Gallery({ gallery }: { gallery: ProductSummaryView["gallery"] }) {
  if (!gallery) return null;
  const { main, thumbs } = gallery;
  return (
    <div class="gallery">
      <img src={main.url} alt={main.alt} width={main.width} height={main.height} fetchpriority="high" decoding="async" />
      {thumbs.length > 0 ? (
        <ul class="thumbs">
          {thumbs.map((image) => (
            <li>
              <img src={image.url} alt={image.alt} width={image.width} height={image.height} loading="lazy" decoding="async" />
            </li>
          ))}
        </ul>
      ) : null}
    </div>
  );
}
