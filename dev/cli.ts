// The command line of the tools the README lists (`npm run dev`, `origin`,
// `gateway`, `filter:rebuild`, `warm`, `fleet`): `--help` (or `-h`) prints
// the tool's usage and exits 0, whatever else is given; a flag the tool does
// not know, a flag without its value or a stray argument is one line naming
// it and pointing at `--help`, exit code 2, never a stack trace (node's
// parseArgs throws a TypeError for each, with a hint about `--` that is of
// no use here).
import { parseArgs, type ParseArgsConfig } from "node:util";

/** Exit code of a command-line mistake. */
const USAGE_EXIT_CODE = 2;

/**
 * `config` parsed as parseArgs would (strict: unknown flags refused), from
 * `process.argv` unless `config.args` says otherwise; `command` is how the
 * tool is run (`npm run warm`), for the messages.
 */
export function parseCommandLine<T extends ParseArgsConfig>(command: string, usage: string, config: T): ReturnType<typeof parseArgs<T>> {
  const args = config.args ?? process.argv.slice(2);
  const beforeDashes = args.includes("--") ? args.slice(0, args.indexOf("--")) : args;
  if (beforeDashes.some((arg) => arg === "--help" || arg === "-h")) {
    console.log(usage);
    process.exit(0);
  }
  try {
    return parseArgs(config);
  } catch (error) {
    return usageError(command, parseArgsProblem(error));
  }
}

/** `command: problem (npm run … -- --help)` on stderr, then exit code 2. */
export function usageError(command: string, problem: string): never {
  console.error(`${command}: ${problem} (see ${helpOf(command)})`);
  process.exit(USAGE_EXIT_CODE);
}

/** How to ask `command` for its usage: `npm run warm -- --help`, `npx tsx dev/deployCheck.ts --help`. */
function helpOf(command: string): string {
  return command.startsWith("npm run ") ? `${command} -- --help` : `${command} --help`;
}

/** parseArgs's error in one short line of ours. */
function parseArgsProblem(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const code = (error as { code?: unknown } | null)?.code;
  const quoted = /'([^']*)'/.exec(message)?.[1];
  switch (code) {
    case "ERR_PARSE_ARGS_UNKNOWN_OPTION":
      return `unknown option ${quoted ?? message}`;
    case "ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL":
      return `unexpected argument ${JSON.stringify(quoted ?? message)}: it takes options only`;
    case "ERR_PARSE_ARGS_INVALID_OPTION_VALUE":
      // "Option '--json' does not take an argument"; "Option '--top <value>' argument missing", or "… is ambiguous" (`--top --rate 5`).
      if (quoted === undefined) return message.split("\n")[0]!;
      return message.includes("does not take") ? `${quoted} takes no value` : `${quoted.replace(/ <value>$/, "")} needs a value`;
    default:
      return message.split("\n")[0]!;
  }
}
