// A resource added by the README's steps ("Contributing", "Adding a
// resource") and nothing else: a delivery estimate shown on the product page.
// test/unit/addingAResource.test.ts applies these edits to a copy of the
// project and shows that tsc asks for the steps the README says it asks for,
// and that with all of them the resource flows through the tier, the demo
// origin, the fakes and the documents' tables.

export interface Edit {
  /** The file changed (or made), relative to the project's root. */
  file: string;
  /** Whether the README says `tsc` asks for this step once the registry has the resource. */
  askedByTsc: boolean;
  apply(text: string): string;
}

/** `text` with `insert` put just before `anchor`, which must be there once. */
function before(anchor: string, insert: string): (text: string) => string {
  return (text) => {
    const at = text.indexOf(anchor);
    if (at < 0 || text.indexOf(anchor, at + 1) >= 0) throw new Error(`the fixture's anchor is not there once: ${JSON.stringify(anchor)}`);
    return text.slice(0, at) + insert + text.slice(at);
  };
}

/** `text` with `insert` put just after `anchor`, which must be there once. */
const after = (anchor: string, insert: string) => (text: string) => before(anchor, "")(text).replace(anchor, () => anchor + insert);

const steps =
  (...edits: ((text: string) => string)[]) =>
  (text: string) =>
    edits.reduce((result, edit) => edit(result), text);

export const DELIVERY_EDITS: Edit[] = [
  {
    file: "src/origin/resources.ts",
    askedByTsc: false,
    apply: steps(
      before(
        "  // The first products of the origin's listing",
        `  delivery: {
    code: "d",
    path: (id) => \`/delivery/\${id}\`,
    schema: v.object({ id, days: count, version }),
    onProductPage: true,
    showStaleIfError: true,
    // An estimate: it may be a day out, and a page is whole without it.
    defaults: { ttl: 600, swr: 3600, staleIfError: 86_400, negativeTtl: 300, core: false, originTimeoutMs: 800 },
  },
`,
      ),
    ),
  },
  {
    file: "src/render/view.ts",
    askedByTsc: true,
    apply: steps(
      after("  recommendations: RecommendationView[];\n", "  /** Empty when there is no estimate to show. */\n  delivery: string;\n"),
      after(
        "      recommendations: recommendationsView(model.recommendations),\n",
        '      delivery: model.delivery.state === "ok" ? ["Delivered in", model.delivery.data.days, "working days"].join(" ") : "",\n',
      ),
    ),
  },
  {
    file: "templates/partials/delivery.tsx",
    askedByTsc: false,
    apply: () =>
      `import { html } from "hono/html";\n\nexport function DeliveryNote({ text }: { text: string }) {\n  return text ? html\`<p class="delivery">\${text}</p>\` : html\`\`;\n}\n`,
  },
  {
    file: "templates/product.tsx",
    askedByTsc: true,
    apply: steps(
      before("import { Gallery }", 'import { DeliveryNote } from "./partials/delivery";\n'),
      before("  // The structured data carries", '  { shows: ["delivery"], render: ({ sections }) => DeliveryNote({ text: sections.delivery }) },\n'),
    ),
  },
  {
    file: "dev/origin/contract.ts",
    askedByTsc: true,
    apply: after(
      "    recommendations: (id) => store.recommendations(id),\n",
      "    delivery: (id) => (store.product(id) ? { id, days: 3, version: 1 } : null),\n",
    ),
  },
  {
    file: "test/support/fakes.ts",
    askedByTsc: true,
    apply: before("    listing: { id, ids:", "    delivery: { id, days: 3, version },\n"),
  },
  {
    file: "README.md",
    askedByTsc: false,
    apply: before("| listing (home page) |", "| delivery | no | 600 s | 3600 s | 86400 s | 300 s | 800 ms |\n"),
  },
  {
    file: "docs/origin-contract.md",
    askedByTsc: false,
    apply: before("| listing | `GET /products?", "| delivery | `GET /delivery/{id}` | non-core | 800 ms |\n"),
  },
];

/** Run in the copy, beside the project's own tests of the same things: the resource, end to end. */
export const DELIVERY_FLOW_TEST = `import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDemoOrigin, type DemoOrigin } from "../../dev/origin";
import { parseConfig } from "../../src/config";
import { RESOURCE_NAMES, PAGE_RESOURCES } from "../../src/origin/resources";
import { validateResource } from "../../src/origin/validate";
import { renderProductPage } from "../../src/render";
import { fakeOrigin, samplePageModel } from "../support/fakes";

let origin: DemoOrigin;
beforeAll(async () => {
  origin = await startDemoOrigin({ latencyMs: 0, jitterMs: 0 });
});
afterAll(() => origin.close());

describe("a delivery estimate added by the README's steps", () => {
  it("is a resource of the product page", () => {
    expect(RESOURCE_NAMES).toContain("delivery");
    expect(PAGE_RESOURCES).toContain("delivery");
    expect(parseConfig({ ORIGIN_URL: "http://o.test", PUBLIC_URL: "https://s.test", CACHE_POLICIES: '{"delivery":{"ttl":5}}' }).policies.delivery.ttl).toBe(5);
  });

  it("is served, counted and faulted by the demo origin, as the contract says", async () => {
    const answer = await fetch(origin.url + "/delivery/p-000001");
    expect(answer.status).toBe(200);
    expect(validateResource("delivery", "p-000001", await answer.json())).toEqual({ id: "p-000001", days: 3, version: 1 });
    const counters = await (await fetch(origin.url + "/__admin/counters")).json();
    expect(counters.services.delivery).toBe(1);
    const put = await fetch(origin.url + "/__admin/faults", { method: "PUT", headers: { "content-type": "application/json" }, body: JSON.stringify({ service: "delivery", down: "500" }) });
    expect(put.status).toBe(200);
    expect((await fetch(origin.url + "/delivery/p-000001")).status).toBe(500);
  });

  it("is answered by the fake origin, and has its section on the rendered page", async () => {
    const fake = fakeOrigin();
    expect(fake.calls.delivery).toBe(0);
    const answer = await fake.fetchResource("delivery", "p-000001");
    expect(answer.found && validateResource("delivery", "p-000001", answer.data)).toBeTruthy();
    expect(fake.calls.delivery).toBe(1);
    expect(renderProductPage(samplePageModel("p-000001"))).toContain("Delivered in 3 working days");
  });
});
`;
