/**
 * The driver conformance suite of @tether/testing, run with `Codex.driver` and the real Codex
 * binary against the scripted Responses server (one server per clause).
 */
import { describe, it } from "@effect/vitest"
import { Conformance, ResponsesServer } from "@tether/testing"
import * as Effect from "effect/Effect"
import { offlineCodex } from "./CodexHarness.js"

const slowMarker = "[slow turn]"

/** Plain turns get an immediate answer; the slow turn's answer comes after 20 s. */
const script: ResponsesServer.Script = (request) =>
  ResponsesServer.userTexts(request).some((text) => text.includes(slowMarker))
    ? ResponsesServer.delayed(20_000, ResponsesServer.text("finally"))
    : ResponsesServer.text("plain answer")

const subjectFor = (baseUrl: string): Conformance.Subject => ({
  driver: offlineCodex(baseUrl),
  plain: "Say something plain.",
  plainText: "plain answer",
  slow: `Take your time. ${slowMarker}`
})

describe("Codex driver conformance (real CLI)", () => {
  for (const { id, title } of Conformance.clauses(subjectFor("http://127.0.0.1:1/v1"))) {
    it.live(`${id} ${title}`, () =>
      Effect.gen(function*() {
        const server = yield* ResponsesServer.make({ script })
        const clause = Conformance.clauses(subjectFor(server.baseUrl)).find((c) => c.id === id)!
        yield* clause.run
      }).pipe(Effect.scoped))
  }
})
