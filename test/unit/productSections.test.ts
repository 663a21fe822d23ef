// The product page has one section per resource of the page, and the compiler
// says so: the `@ts-expect-error` lines below are checked by `tsc -p .` (part
// of `npm test`), which fails if any of them compiles, i.e. if a view, or the
// page's template, would take a page with a section missing. Adding a
// resource to the registry (src/origin/resources.ts) without its section
// fails the same way: at SectionsFor, where the page's sections are derived
// from PAGE_RESOURCES.
import { assertType, describe, expect, it } from "vitest";
import { PAGE_RESOURCES, type PageResource } from "../../src/origin/resources";
import type { ProductPageModel } from "../../src/render/model";
import { type ProductSections, type ProductView, productView, type SectionsFor } from "../../src/render/view";
import type { ProductPage } from "../../templates/product";
import { samplePageModel } from "../support/fakes";

function view(): ProductView {
  const id = "p-000001";
  const model: ProductPageModel = { ...samplePageModel(id), recommendations: { state: "none" } };
  return productView(model);
}

describe("the product page's sections", () => {
  it("are one per resource of the page, as the registry lists them", () => {
    expect(Object.keys(view().sections).sort()).toEqual([...PAGE_RESOURCES].sort());
  });

  it("cannot be left out: a view or a page without one does not compile", () => {
    const { meta, structuredData, sections } = view();
    const { reviews, ...withoutReviews } = sections;
    assertType<ProductSections>({ ...withoutReviews, reviews });
    // @ts-expect-error the reviews section is missing
    assertType<ProductSections>(withoutReviews);
    // @ts-expect-error a product page view without its reviews section
    assertType<ProductView>({ meta, structuredData, sections: withoutReviews });
    // @ts-expect-error the template takes no page with a section missing
    assertType<Parameters<typeof ProductPage>[0]>({ meta, structuredData, sections: withoutReviews });
    expect(Object.keys(withoutReviews)).not.toContain("reviews");
  });

  it("exist only for resources that have a section view: a new page resource without one does not compile", () => {
    // What `PageResource` becomes when a resource with `onProductPage: true` is added to the registry.
    type WithGiftWrap = PageResource | "giftWrap";
    // @ts-expect-error "giftWrap" has no entry in SectionViews (src/render/view.ts)
    assertType<SectionsFor<WithGiftWrap> | undefined>(undefined);
    assertType<SectionsFor<PageResource> | undefined>(undefined);
    expect(PAGE_RESOURCES).not.toContain("giftWrap");
  });
});
