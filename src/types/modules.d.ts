// Liquid templates are imported as text: wrangler bundles them with its
// "Text" module rule (wrangler.toml), vitest through the plugin in
// vitest.config.ts.
declare module "*.liquid" {
  const source: string;
  export default source;
}
