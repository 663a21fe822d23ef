import type { ErrorView } from "../src/render/view";
import { Layout } from "./layout";

export function UnavailablePage({ meta, heading, message, retryText }: ErrorView) {
  return (
    <Layout meta={meta}>
      <h1>{heading}</h1>
      <p role="status">{retryText}</p>
      {message ? <p>{message}</p> : null}
      <p>
        <a href="/">Back to the home page</a>
      </p>
    </Layout>
  );
}
