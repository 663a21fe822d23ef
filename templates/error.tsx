import type { ErrorView } from "../src/render/view";
import { Layout } from "./layout";

/** Any error status without a page of its own (400, 500…). */
export function ErrorPage({ meta, heading, message, status }: ErrorView) {
  return (
    <Layout meta={meta}>
      <h1>{heading}</h1>
      {message ? <p>{message}</p> : null}
      <p class="muted">Error {status}</p>
      <p>
        <a href="/">Back to the home page</a>
      </p>
    </Layout>
  );
}
