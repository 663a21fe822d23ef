// The layers of docs/architecture.md, kept by a tool: `npm run deps`, run by
// `npm test` (and so by CI). Type-only imports count: a circle through types
// still ties two modules together for a reader.
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: "no-circle",
      comment: "Modules that import each other, directly or round a loop: one of them holds what both need, or the seam is in the wrong place.",
      severity: "error",
      from: {},
      to: { circular: true },
    },
    {
      name: "cache-knows-no-purges",
      comment: "The cache owns the small interface through which purge judgements reach it; invalidation/ implements it.",
      severity: "error",
      from: { path: "^src/cache/" },
      to: { path: "^src/invalidation/" },
    },
    {
      name: "cache-l2-is-a-client",
      comment: "src/cache/l2/ is the Redis client that the read path, the location tier and the fill call: it imports none of them, only the entry, keys and the layers below (docs/architecture.md, Layers and their folders).",
      severity: "error",
      from: { path: "^src/cache/l2/" },
      to: { path: "^src/cache/(fill/|location/|(readThrough|pageSteps|pageRequest|l1|hotness|served)\\.ts$)" },
    },
    {
      name: "cache-location-knows-no-fill",
      comment: "The location tier (src/cache/location/) stores and reads copies; the fill and the read path call it, never the other way.",
      severity: "error",
      from: { path: "^src/cache/location/" },
      to: { path: "^src/cache/(fill/|(readThrough|pageSteps|pageRequest)\\.ts$)" },
    },
    {
      name: "cache-fill-knows-no-steps",
      comment: "The fill (src/cache/fill/) takes a page read's types from pageRequest.ts; the read path's steps call it, never the other way.",
      severity: "error",
      from: { path: "^src/cache/fill/" },
      to: { path: "^src/cache/(readThrough|pageSteps)\\.ts$" },
    },
    {
      name: "render-knows-no-cache",
      comment: "Rendering turns data into HTML; where the data came from is the page's business (http/).",
      severity: "error",
      from: { path: "^src/render/" },
      to: { path: "^src/cache/" },
    },
    {
      name: "templates-lay-out-views",
      comment: "A template (templates/*.tsx) is a function of its typed view: it imports the view types, jsonForScript and other templates, never the tiers, the origin or the routes.",
      severity: "error",
      from: { path: "^templates/" },
      to: { path: "^src/", pathNot: "^src/render/(view|jsonld|statusView)\\.ts$" },
    },
    {
      name: "render-renders",
      comment: "Pages are rendered through src/render/ (models to views to templates); the rest of the tier calls its render functions.",
      severity: "error",
      from: { path: "^(src|dev|bench)/", pathNot: "^src/render/" },
      to: { path: "^templates/" },
    },
    {
      name: "origin-stands-alone",
      comment: "The origin client and its contract import nothing else of the tier but the Workers rules in shared/.",
      severity: "error",
      from: { path: "^src/origin/" },
      to: { path: "^src/", pathNot: "^src/(origin|shared)/" },
    },
    {
      name: "shared-is-the-ground-floor",
      comment: "shared/ holds the Workers rules and primitives every layer uses: it imports none of them.",
      severity: "error",
      from: { path: "^src/shared/" },
      to: { path: "^src/", pathNot: "^src/shared/" },
    },
    {
      name: "the-worker-ships-alone",
      comment: "What is deployed never imports the dev servers, the benchmarks or the tests.",
      severity: "error",
      from: { path: "^src/" },
      to: { path: "^(dev|bench|test)/" },
    },
    {
      name: "tests-are-no-harness",
      comment: "The dev stack and the benchmarks share one harness with the tests, dev/harness/ (processes, ports, redis-server, the stack, the bundle); nothing outside test/ imports test/.",
      severity: "error",
      from: { path: "^(dev|bench)/" },
      to: { path: "^test/" },
    },
    {
      name: "no-missing-module",
      comment: "An import that resolves to nothing.",
      severity: "error",
      from: {},
      to: { couldNotResolve: true, pathNot: "^(cloudflare:|node:)" },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    exclude: { path: "^(node_modules|\\.wrangler)/" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: { extensions: [".ts", ".tsx", ".js", ".mjs", ".json"], exportsFields: ["exports"], conditionNames: ["import", "require", "node", "default", "types"] },
  },
};
