// The page's schema.org data in its <script>: the one place a template writes
// text it did not write itself unescaped. jsonForScript serialises it with
// `<`, `>`, `&` (and U+2028/2029) as \u escapes, so that no `</script>` or
// `<!--` can appear in it, and it is still the same JSON.
import { html, raw } from "hono/html";
import { jsonForScript } from "../../src/render/jsonld";

export function JsonLd({ data }: { data: Record<string, unknown> }) {
  return html`<script type="application/ld+json">${raw(jsonForScript(data))}</script>`;
}
