// The checks of a flag's value that the benchmarks' command lines make, after
// dev/cli.ts's parseCommandLine has read them: a wrong value is its usage
// error, one line naming the flag, what it takes and what it got, exit code 2.
// Numbers are read with Number(), as the benchmarks always read them.
import { usageError } from "../../dev/cli";

/** "from 2 to 120", "from 1". */
const range = (min: number, max: number) => (max === Number.POSITIVE_INFINITY ? `from ${min}` : `from ${min} to ${max}`);

/** `text` as a whole number from `min` to `max`, or `command`'s usage error naming `flag`. */
export function wholeNumber(command: string, flag: string, text: string, min: number, max = Number.POSITIVE_INFINITY): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value < min || value > max)
    usageError(command, `${flag} must be a whole number ${range(min, max)}, got ${JSON.stringify(text)}`);
  return value;
}

/** `text`, comma-separated (empty items skipped), as whole numbers from `min` to `max` each. */
export function wholeNumbers(command: string, flag: string, text: string, min: number, max = Number.POSITIVE_INFINITY): number[] {
  const items = text.split(",").filter(Boolean);
  if (items.some((item) => !Number.isInteger(Number(item)) || Number(item) < min || Number(item) > max))
    usageError(command, `${flag} takes whole numbers ${range(min, max)}, comma-separated, got ${JSON.stringify(text)}`);
  return items.map(Number);
}

/** `text` if it is one of `choices`. */
export function oneOf<T extends string>(command: string, flag: string, text: string, choices: readonly T[]): T {
  if (!(choices as readonly string[]).includes(text))
    usageError(command, `${flag} must be ${choices.join(", ").replace(/, ([^,]*)$/, " or $1")}, got ${JSON.stringify(text)}`);
  return text as T;
}

/** `--results-suffix NAME`: part of a file name under bench/results/. */
export function resultsSuffix(command: string, text: string | undefined): string | undefined {
  if (text !== undefined && !/^[A-Za-z0-9_-]*$/.test(text))
    usageError(command, `--results-suffix takes letters, digits, _ and - only, got ${JSON.stringify(text)}`);
  return text;
}
