// Reading a body that is untrusted input (an origin's answer, a copy in the
// location cache that any Worker on the zone may have written): no further
// than a byte cap, whatever it claims its length to be.

/** The body's bytes, or undefined past `maxBytes` (its stream cancelled, read no further). A broken stream rejects. */
export async function readBounded(response: Response, maxBytes: number): Promise<Uint8Array | undefined> {
  if (Number(response.headers.get("content-length")) > maxBytes) {
    await response.body?.cancel();
    return undefined;
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
