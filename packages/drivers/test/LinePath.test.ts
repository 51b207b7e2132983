/**
 * Every one-shot parser the drivers ship is built with `Driver.parseFromLines`: a run reads its
 * CLI's lines with the line function (no `Stream` per run, core's LineParser.test.ts), and so does
 * a driver a user builds from the public parser. What marks such a parser is the line function
 * core finds on it (`Symbol.for("@tether/core/Driver/LineFunction")`).
 */
import { describe, expect, it } from "@effect/vitest"
import type * as Driver from "@tether/core/Driver"
import { Acp, Claude, CodeBuddy, Codex, Cursor, Gemini } from "@tether/drivers"

const lineFunction = Symbol.for("@tether/core/Driver/LineFunction")
const hasLineFunction = (parse: Driver.Driver["parse"]): boolean =>
  typeof (parse as unknown as { readonly [lineFunction]?: unknown })[lineFunction] === "function"

describe("one-shot parsers read lines with their line function", () => {
  it.each(
    [
      ["Claude.parse", Claude.parse],
      ["CodeBuddy.parse", CodeBuddy.parse],
      ["Codex.parse", Codex.parse],
      ["Cursor.parse", Cursor.parse],
      ["Gemini.parse", Gemini.parse],
      ["Claude.driver().parse", Claude.driver().parse],
      ["CodeBuddy.driver().parse", CodeBuddy.driver().parse],
      ["Codex.driver().parse", Codex.driver().parse],
      ["Cursor.driver().parse", Cursor.driver().parse],
      ["Gemini.driver().parse", Gemini.driver().parse],
      ["Acp.driver(config).parse", Acp.driver({ command: "agent", layout: Claude.layout }).parse]
    ] as const
  )("%s", (_, parse) => {
    expect(hasLineFunction(parse)).toBe(true)
  })
})
