/**
 * Lines one or two edits away from a recorded line, for the properties that check a parser's
 * reading of a line without `JSON.parse` against `JSON.parse`'s: each edit inserts, deletes or
 * replaces one character, drawn from those that change what a JSON line means or whether it is
 * JSON at all.
 */
import * as FastCheck from "effect/FastCheck"

const tricky = FastCheck.constantFrom(
  `"`,
  "\\",
  "}",
  "{",
  ",",
  ":",
  " ",
  "\n",
  "\r",
  "\u0000",
  "\u2028",
  "a",
  "\ud800",
  "é"
)

type Edit = readonly ["insert" | "delete" | "replace", number, string]

/** Up to two edits at any position. */
export const edits: FastCheck.Arbitrary<ReadonlyArray<Edit>> = FastCheck.array(
  FastCheck.tuple(
    FastCheck.constantFrom("insert" as const, "delete" as const, "replace" as const),
    FastCheck.nat(),
    tricky
  ),
  { maxLength: 2 }
)

/** `line` with `edits` applied in turn (each position taken modulo the line's length then). */
export const edited = (line: string, edits: ReadonlyArray<Edit>): string => {
  for (const [edit, at, char] of edits) {
    const i = at % (line.length + 1)
    line = edit === "insert"
      ? line.slice(0, i) + char + line.slice(i)
      : edit === "delete"
      ? line.slice(0, i) + line.slice(i + 1)
      : line.slice(0, i) + char + line.slice(i + 1)
  }
  return line
}

/** `JSON.parse(line)` as a plain object, `"non_json"` when it throws, `undefined` for other JSON. */
export const parsedRecord = (line: string): { readonly [key: string]: unknown } | "non_json" | undefined => {
  let value: unknown
  try {
    value = JSON.parse(line)
  } catch {
    return "non_json"
  }
  return typeof value === "object" && value !== null && !Array.isArray(value)
    ? value as { readonly [key: string]: unknown }
    : undefined
}
