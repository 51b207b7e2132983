/**
 * Property-based fuzzing of every provider line parser (SECURITY.md "Inputs that must never
 * crash or hang the host"): generated runs of lines (recorded transcripts with mutated,
 * replaced, inserted and deleted lines; hostile values such as `{"toString":1}`, `1e309` and
 * arrays nested ten thousand deep planted into recorded records; random text and JSON) must end
 * without a defect, give only well-formed outputs, turn every line that is not the protocol into
 * notices, and parse each line within a fixed budget.
 *
 * Plugging in a parser is one line in `subjects` below:
 * - a driver's `parse` (the `Driver.Output` protocol) with its recorded transcripts in
 *   `test/fixtures/<dir>/*.jsonl`:  `Fuzz.driver("claude-live", ClaudeLive.parse, "claude-live")`;
 * - any other line protocol (a live session's stdout such as Claude's stream-json input mode, the
 *   Codex app-server or ACP): a `Fuzz.Subject` literal giving `parse` (lines → outputs), the
 *   recorded `transcripts` (`Fuzz.recorded("<dir>")`), `isFailure` (its typed error), `isOutput`
 *   (its output schema, e.g. `Schema.is(...)`) and `isForeign` (what a non-protocol line may give).
 *
 * `npm test` runs a short, fixed-seed setting; `npm run fuzz` runs the long one (see
 * `fuzz/settings.ts`: `TETHER_FUZZ=long`, `FUZZ_SEED`, `FUZZ_RUNS`).
 */
import { describe, expect, it } from "@effect/vitest"
import { Claude, CodeBuddy, Codex, Cursor, Gemini } from "@tether/drivers"
import * as Effect from "effect/Effect"
import * as FastCheck from "effect/FastCheck"
import * as AcpMap from "../src/internal/acpMap.js"
import * as GeminiLive from "../src/internal/geminiLive.js"
import { claudeAgentDriver, codexAgentDriver } from "./AcpHarness.js"
import * as ClaudeLive from "./ClaudeLiveFuzz.js"
import * as Fuzz from "./fuzz/parsers.js"
import * as Settings from "./fuzz/settings.js"

const subjects: ReadonlyArray<Fuzz.Subject<unknown>> = [
  Fuzz.driver("claude", Claude.parse, "claude"),
  // Its fixtures are recorded frames both ways: the session reads their stdout lines.
  { ...Fuzz.driver("claude-live", ClaudeLive.parse, "claude"), transcripts: ClaudeLive.transcripts },
  Fuzz.driver("codebuddy", CodeBuddy.parse, "codebuddy"),
  Fuzz.driver("codex", Codex.parse, "codex"),
  Fuzz.driver("codex-live", Codex.parseLive, "codex-live"),
  Fuzz.driver("gemini", Gemini.parse, "gemini"),
  Fuzz.driver("cursor", Cursor.parse, "cursor"),
  Fuzz.driver("gemini-acp", (lines, context) => AcpMap.parse(lines, context, GeminiLive.naming), "gemini-acp"),
  Fuzz.driver("claude-agent-acp", claudeAgentDriver("http://127.0.0.1:1").parse, "claude-agent-acp"),
  Fuzz.driver("codex-acp", codexAgentDriver("http://127.0.0.1:1/v1").parse, "codex-acp")
] as ReadonlyArray<Fuzz.Subject<unknown>>

const sizes: Fuzz.Sizes = Settings.long ? { depth: 100_000, repeat: 1_100_000 } : { depth: 12_000, repeat: 70_000 }

/**
 * Per line. The largest generated line parses in a few milliseconds when parsing is linear; the
 * failures this guards against took seconds to minutes (a quadratic pattern: 5 s at 59 KiB).
 */
const budgetMs = 2_000

describe("parser fuzzing", () => {
  for (const subject of subjects) {
    it.live(
      `${subject.name}: generated runs end without a defect, with well-formed outputs, in bounded time`,
      () =>
        Effect.gen(function*() {
          const numRuns = Settings.runs(300, 15_000)
          const totals = { runs: 0, lines: 0, outputs: 0, failed: 0, bytes: 0, slowestMs: 0 }
          yield* Effect.promise(() =>
            FastCheck.assert(
              FastCheck.asyncProperty(Fuzz.runArb(subject, sizes), async (lines) => {
                const checked = await Effect.runPromise(Fuzz.check(subject, lines, budgetMs))
                totals.runs++
                totals.lines += checked.lines
                totals.outputs += checked.outputs
                totals.failed += checked.failed ? 1 : 0
                totals.bytes += checked.bytes
                totals.slowestMs = Math.max(totals.slowestMs, checked.slowestMs)
                expect(checked.problems).toEqual([])
                // Parsing is synchronous: let the worker answer the test runner between runs.
                await new Promise((resolve) => setImmediate(resolve))
              }),
              { seed: Settings.seed, numRuns, endOnFailure: true }
            )
          )
          expect(totals.runs).toBe(numRuns)
          Settings.report(
            `fuzz ${subject.name}: seed ${Settings.seed}, ${totals.runs} runs, ${totals.lines} lines ` +
              `(${(totals.bytes / 1024 / 1024).toFixed(1)} MiB), ${totals.outputs} outputs, ` +
              `${totals.failed} runs ended by a ProtocolError, slowest line ${totals.slowestMs.toFixed(1)} ms`
          )
        }),
      Settings.long ? 3_600_000 : 60_000
    )
  }
})
