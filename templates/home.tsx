import type { HomeView } from "../src/render/view";
import { Layout } from "./layout";

export function HomePage({ meta, products }: HomeView) {
  return (
    <Layout meta={meta}>
      <h1>All products</h1>
      {products.length > 0 ? (
        <ul class="product-list">
          {products.map((item) => (
            <li>
              <a href={item.href}>{item.title}</a>
            </li>
          ))}
        </ul>
      ) : (
        <p class="muted">No products to show yet.</p>
      )}
    </Layout>
  );
}
