// The README's "Adding a resource" list (Contributing) is the whole of the
// work: checked both ways here. No file names every resource by hand unless
// the list names it, and each file the list calls such a list still is one.
// Then a resource (test/support/addResource.ts: a delivery estimate) is added
// to a copy of the project by the list's steps alone: `tsc` asks for the steps
// the README says it asks for, and with all of them the copy type-checks and
// the resource is served by the demo origin, answered by the fakes, rendered
// on the page and checked in the documents' tables.
import { spawn } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PAGE_RESOURCES, RESOURCE_NAMES } from "../../src/origin/resources";
import { DELIVERY_EDITS, DELIVERY_FLOW_TEST, type Edit } from "../support/addResource";

const ROOT = new URL("../../", import.meta.url).pathname;
const README = readFileSync(join(ROOT, "README.md"), "utf8");

/** The list's steps, each as its text on one line. */
function addingSteps(): string[] {
  const start = README.indexOf("**Adding a resource**");
  expect(start, "the README has its list").toBeGreaterThanOrEqual(0);
  const steps: string[] = [];
  for (const line of README.slice(start).split("\n").slice(1)) {
    if (/^\d+\. /.test(line)) steps.push(line.replace(/^\d+\. /, ""));
    else if (/^ {3}\S/.test(line) && steps.length > 0) steps[steps.length - 1] += ` ${line.trim()}`;
    else if (steps.length > 0) break;
  }
  return steps;
}

/** The project's files and folders a step names, in backticks or as a link. */
function pathsIn(step: string): string[] {
  return [...step.matchAll(/`((?:src|dev|bench|test|templates|docs)\/[^`\s]*)`|\]\(((?:docs)\/[^)#\s]+)\)/g)].map((m) => (m[1] ?? m[2])!);
}

const named = (paths: string[], file: string) => paths.some((path) => path === file || (path.endsWith("/") && file.startsWith(path)));

function filesUnder(folder: string): string[] {
  return readdirSync(join(ROOT, folder), { recursive: true, encoding: "utf8" })
    .filter((name) => /\.tsx?$/.test(name) && !name.includes("node_modules"))
    .map((name) => `${folder}/${name}`);
}

const isComment = (line: string) => /^\s*(\/\/|\*|\/\*)/.test(line);

/** Files outside test specs in which every resource of the page is named (as a string or a key) within a few lines: lists that a new resource would silently miss. */
function handLists(): string[] {
  const names = new RegExp(`["'\`](${PAGE_RESOURCES.join("|")})["'\`]|\\b(${PAGE_RESOURCES.join("|")})\\s*:`, "g");
  return ["src", "templates", "dev", "bench", "test/support"].flatMap(filesUnder).filter((file) => {
    const lines = readFileSync(join(ROOT, file), "utf8").split("\n");
    return lines.some((_, i) => {
      const window = lines.slice(i, i + 6).filter((line) => !isComment(line));
      return new Set(Array.from(window.join("\n").matchAll(names), (m) => m[1] ?? m[2])).size === PAGE_RESOURCES.length;
    });
  });
}

describe("the README's list for adding a resource", () => {
  const steps = addingSteps();
  const paths = steps.flatMap(pathsIn);

  it("names files and folders that exist", () => {
    expect(steps.length).toBeGreaterThanOrEqual(4);
    for (const path of paths) expect(statSync(join(ROOT, path), { throwIfNoEntry: false }), path).toBeDefined();
  });

  it("names every file that lists the resources by hand, and each it calls such a list is one", () => {
    const found = handLists();
    expect(found.filter((file) => !named(paths, file))).toEqual([]);
    const byHand = steps.find((step) => step.startsWith("lists that name resources by hand"));
    expect(byHand, "a step for the lists by hand").toBeDefined();
    expect(pathsIn(byHand!).filter((file) => !found.includes(file))).toEqual([]);
  });

  it("leaves no other file of src/ naming a resource: the rest reads the registry", () => {
    const mention = new RegExp(`"(${RESOURCE_NAMES.join("|")})"|\\.(${RESOURCE_NAMES.join("|")})\\b`);
    const mentions = filesUnder("src")
      .filter((file) => !/^src\/(origin\/resources\.ts|origin\/types\.ts|render\/)/.test(file))
      .flatMap((file) =>
        readFileSync(join(ROOT, file), "utf8")
          .split("\n")
          .flatMap((line, i) => (!isComment(line) && mention.test(line) ? [`${file}:${i + 1}: ${line.trim()}`] : [])),
      );
    expect(mentions).toEqual([]);
  });

  it("names every file the fixture's resource takes", () => {
    for (const { file } of DELIVERY_EDITS) expect(named([...paths, "README.md"], file), file).toBe(true);
  });
});

describe("a resource added to a copy of the project by the README's steps alone", () => {
  let copy: string;

  beforeAll(() => {
    copy = mkdtempSync(join(tmpdir(), "pp-add-resource-"));
    for (const entry of ["src", "templates", "dev", "test", "bench", "docs", "README.md", "tsconfig.json", "package.json", "vitest.config.ts"]) {
      cpSync(join(ROOT, entry), join(copy, entry), { recursive: true, filter: (source) => !source.includes("/results/") });
    }
    symlinkSync(join(ROOT, "node_modules"), join(copy, "node_modules"), "dir");
  });
  afterAll(() => rmSync(copy, { recursive: true, force: true }));

  const apply = (edits: Edit[]) => {
    for (const { file, apply } of edits) {
      const path = join(copy, file);
      mkdirSync(dirname(path), { recursive: true });
      let text = "";
      try {
        text = readFileSync(path, "utf8");
      } catch {}
      writeFileSync(path, apply(text));
    }
  };
  /**
   * Runs a tool of the copy's, and gives its exit status and output. Not
   * spawnSync: a test worker blocked for a minute misses vitest's own calls
   * (an "onTaskUpdate" time-out failed a CI run whose tests all passed).
   */
  const run = (args: string[]) =>
    new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve, reject) => {
      const child = spawn(join(copy, "node_modules/.bin", args[0]!), args.slice(1), { cwd: copy, timeout: 240_000 });
      const out = { stdout: "", stderr: "" };
      child.stdout.setEncoding("utf8").on("data", (chunk: string) => void (out.stdout += chunk));
      child.stderr.setEncoding("utf8").on("data", (chunk: string) => void (out.stderr += chunk));
      child.on("error", reject);
      child.on("close", (status) => resolve({ status, ...out }));
    });
  /** The files `tsc` finds errors in. */
  const tscComplaints = async () => {
    const { stdout } = await run(["tsc", "-p", "."]);
    return [...new Set([...stdout.matchAll(/^([\w/.-]+)\(\d+,\d+\): error/gm)].map((m) => m[1]!))].sort();
  };

  it("makes tsc ask for the steps the README says it asks for, and complain nowhere the README does not name", async () => {
    apply(DELIVERY_EDITS.filter((edit) => !edit.askedByTsc));
    const complaints = await tscComplaints();
    const asked = DELIVERY_EDITS.filter((edit) => edit.askedByTsc).map((edit) => edit.file);
    expect(asked.filter((file) => !complaints.includes(file))).toEqual([]);
    const namedWithTsc = addingSteps()
      .filter((step) => step.includes("`tsc`"))
      .flatMap(pathsIn);
    expect(complaints.filter((file) => !named(namedWithTsc, file))).toEqual([]);
  }, 240_000);

  it("type-checks with every step taken, and the resource flows through the demo origin, the fakes, the page and the tables", async () => {
    apply(DELIVERY_EDITS.filter((edit) => edit.askedByTsc));
    expect(await tscComplaints()).toEqual([]);
    writeFileSync(join(copy, "test/unit/deliveryFlow.test.ts"), DELIVERY_FLOW_TEST);
    // No global set-up: these tests bundle no worker.
    writeFileSync(join(copy, "vitest.fixture.config.mjs"), "export default { test: { testTimeout: 30000 } };\n");
    const specs = ["deliveryFlow", "readmeTables", "productSections", "render", "demo-origin"].map((name) => `test/unit/${name}.test.ts`);
    const result = await run(["vitest", "run", "--config", "vitest.fixture.config.mjs", ...specs]);
    expect(result.status, `${result.stdout}\n${result.stderr}`).toBe(0);
  }, 240_000);
});
