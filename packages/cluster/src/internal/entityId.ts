/**
 * Thread keys to entity ids. A key is any JavaScript string; an entity id is stored in SQL
 * (`VARCHAR(255)`, where PostgreSQL refuses NUL) and hashed to a shard. `JSON.stringify` escapes
 * NUL, control characters and lone surrogates and is injective; keys whose escaped form is too
 * long get a SHA-256 digest instead. The prefixes keep the two forms apart.
 *
 * @internal
 */
import * as Crypto from "node:crypto"

const maxEscaped = 240

/** @internal */
export const entityIdOf = (key: string): string => {
  const escaped = JSON.stringify(key).slice(1, -1)
  if (escaped.length <= maxEscaped) return `k:${escaped}`
  // UTF-16 code units, so lone surrogates hash as themselves.
  return `h:${Crypto.createHash("sha256").update(Buffer.from(key, "utf16le")).digest("hex")}`
}
