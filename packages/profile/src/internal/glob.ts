/**
 * Glob matching for profile layouts: `*` (any run inside one segment), `?` (one character
 * inside a segment), `**` (any number of whole segments). Paths are `/` separated and
 * relative to the profile root. Every other character is literal.
 *
 * @internal
 */

type Segment = { readonly _tag: "Any" } | { readonly _tag: "One"; readonly regex: RegExp }

const compiled = new Map<string, ReadonlyArray<Segment>>()

const escape = (char: string): string => /[\\^$.*+?()[\]{}|/]/.test(char) ? `\\${char}` : char

const compileSegment = (segment: string): Segment => {
  if (segment === "**") return { _tag: "Any" }
  let source = ""
  for (const char of segment) {
    source += char === "*" ? "[^/]*" : char === "?" ? "[^/]" : escape(char)
  }
  return { _tag: "One", regex: new RegExp(`^${source}$`, "u") }
}

const compile = (pattern: string): ReadonlyArray<Segment> => {
  let segments = compiled.get(pattern)
  if (segments === undefined) {
    segments = pattern.split("/").filter((s) => s.length > 0).map(compileSegment)
    compiled.set(pattern, segments)
  }
  return segments
}

const matchFrom = (
  pattern: ReadonlyArray<Segment>,
  p: number,
  path: ReadonlyArray<string>,
  i: number,
  prefix: boolean
): boolean => {
  if (p === pattern.length) return i === path.length
  // In prefix mode a pattern that still has segments left can match below `path`.
  if (i === path.length) return prefix || pattern.slice(p).every((s) => s._tag === "Any")
  const segment = pattern[p]!
  if (segment._tag === "Any") {
    return matchFrom(pattern, p + 1, path, i, prefix) || matchFrom(pattern, p, path, i + 1, prefix)
  }
  return segment.regex.test(path[i]!) && matchFrom(pattern, p + 1, path, i + 1, prefix)
}

const split = (path: string): ReadonlyArray<string> => path.split("/").filter((s) => s.length > 0)

/**
 * Whether `path` or one of its ancestor directories matches one of `patterns` (a pattern that
 * names a directory covers its whole subtree).
 *
 * @internal
 */
export const matches = (patterns: ReadonlyArray<string>, path: string): boolean => {
  const segments = split(path)
  for (let length = 1; length <= segments.length; length++) {
    const prefix = segments.slice(0, length)
    if (patterns.some((pattern) => matchFrom(compile(pattern), 0, prefix, 0, false))) return true
  }
  return false
}

/**
 * Whether an entry below the directory `path` could match one of `patterns` (used to prune
 * the walk of large provider directories such as session stores).
 *
 * @internal
 */
export const couldMatchBelow = (patterns: ReadonlyArray<string>, path: string): boolean => {
  const segments = split(path)
  return matches(patterns, path) ||
    patterns.some((pattern) => matchFrom(compile(pattern), 0, segments, 0, true))
}
