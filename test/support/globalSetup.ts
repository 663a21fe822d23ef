// Runs once before all test files: one worker bundle for every integration test.
import { buildWorker } from "./build";

export default function setup(): void {
  buildWorker();
}
