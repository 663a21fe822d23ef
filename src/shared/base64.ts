// Bytes ⇄ base64 text with the Web APIs both Workers and Node have (btoa/atob):
// @upstash/redis carries strings, so binary values travel as base64.

export function bytesToBase64(bytes: Uint8Array): string {
  return btoa(bytesToBinary(bytes));
}

/** Bytes as a string of the same char codes (what btoa takes; ASCII for bytes below 0x80). */
export function bytesToBinary(bytes: Uint8Array): string {
  let binary = "";
  // Chunks keep String.fromCharCode's argument list small.
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return binary;
}

export function base64ToBytes(text: string): Uint8Array {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}
