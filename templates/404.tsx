import type { ErrorView } from "../src/render/view";
import { Layout } from "./layout";

export function NotFoundPage({ meta, heading, message }: ErrorView) {
  return (
    <Layout meta={meta}>
      <h1>{heading}</h1>
      {message ? <p>{message}</p> : null}
      <p>
        <a href="/">Back to the home page</a>
      </p>
    </Layout>
  );
}
