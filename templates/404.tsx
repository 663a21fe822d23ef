import type { ErrorView } from "../src/render/view";
import { Layout } from "./layout";

export function NotFoundPage({ meta, heading, message }: ErrorView) {
  return (
    <Layout meta={meta}>
      <h1>{heading}</h1>
      {message ? <p>{message}</p> : null}
      <p>The product you are looking for does not exist or is no longer available.</p>
      <p>
        <a href="/">Back to the home page</a>
      </p>
    </Layout>
  );
}
