// Runs once before all test files: one worker bundle for every integration test.
import { buildBundle } from "../../dev/harness/bundle";
import { BUNDLE_DIR } from "./build";

export default async function setup(): Promise<void> {
  await buildBundle(BUNDLE_DIR);
}
