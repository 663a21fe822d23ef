// The filter's Redis keys, all under the tier's prefix and at most 50 characters: `pp:v1:kid:meta`,
// `pp:v1:kid:<version>:<segment>` and `pp:v1:kid:<version>:log`. Versions are our own short base-36 strings.
import { MAX_KEY_LENGTH } from "../cache/keys";

/** A version: base-36 build time (8 characters until the year 5188) and 4 random characters. */
export const VERSION_PATTERN = /^[0-9a-z]{1,16}$/;

export type KnownIdsKeys = ReturnType<typeof knownIdsKeys>;

export function knownIdsKeys(prefix: string) {
  const meta = `${prefix}:kid:meta`;
  const checked = (key: string) => {
    if (key.length > MAX_KEY_LENGTH) throw new RangeError(`known-ids key longer than ${MAX_KEY_LENGTH} characters: ${key}`);
    return key;
  };
  const versioned = (version: string, suffix: string) => {
    if (!VERSION_PATTERN.test(version)) throw new RangeError("refusing to build a key from an invalid filter version");
    return checked(`${prefix}:kid:${version}:${suffix}`);
  };
  checked(meta);
  return {
    meta,
    segment: (version: string, index: number) => versioned(version, String(index)),
    log: (version: string) => versioned(version, "log"),
  };
}

/** A fresh version, sortable by build time. */
export function newVersion(now: number): string {
  const random = crypto.getRandomValues(new Uint32Array(1))[0]!;
  return now.toString(36) + (random % 36 ** 4).toString(36).padStart(4, "0");
}
