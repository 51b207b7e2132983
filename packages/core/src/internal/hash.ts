/** @internal */
import * as Crypto from "node:crypto"

/**
 * SHA-256 (hex) of the parts, in order. A digest of a structure starts with its domain tag
 * (`tether/<what>/v<n>\u0000`), so digests of different kinds never coincide.
 *
 * @internal
 */
export const sha256 = (...parts: ReadonlyArray<string | Uint8Array>): string => {
  const hash = Crypto.createHash("sha256")
  for (const part of parts) hash.update(part)
  return hash.digest("hex")
}
