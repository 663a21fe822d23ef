// Reading a body that is untrusted input (an origin's answer, a copy in the
// location cache that any Worker on the zone may have written): no further
// than a byte cap, whatever it claims its length to be.

/** The body's bytes, or undefined past `maxBytes` (its stream cancelled, read no further). A broken stream rejects. */
export async function readBounded(response: Response, maxBytes: number): Promise<Uint8Array | undefined> {
  const declared = response.headers.get("content-length");
  const length = declared === null ? Number.NaN : Number(declared);
  if (length > maxBytes) {
    await response.body?.cancel();
    return undefined;
  }
  // A declared length within the cap, of bytes as sent (not decompressed on
  // the way in): off the network the runtime reads that many and no more, so
  // the whole body is read at once (one call, where a reader's loop costs a
  // promise a chunk). A response made in code may say anything: checked after.
  if (Number.isSafeInteger(length) && length >= 0 && !response.headers.has("content-encoding")) {
    const bytes = new Uint8Array(await response.arrayBuffer());
    return bytes.byteLength <= maxBytes ? bytes : undefined;
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  if (response.body) {
    const reader = response.body.getReader();
    for (let read = await reader.read(); !read.done; read = await reader.read()) {
      size += read.value.byteLength;
      if (size > maxBytes) {
        await reader.cancel();
        return undefined;
      }
      chunks.push(read.value);
    }
  }
  const bytes = new Uint8Array(size);
  let at = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, at);
    at += chunk.byteLength;
  }
  return bytes;
}
