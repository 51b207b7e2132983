import { afterAll, describe, expect, it } from "@effect/vitest"
import { Gateway } from "@tether/gateway"
import { Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import { connect, expectNoTokenInLogs, logLayer, remember } from "./fixtures/harness.js"

// SECURITY.md: "a gateway token never appears in anything Tether writes or returns" (threat model)
// and "Another agent of the same host: it must not see or call this agent's tools, nor read its
// results." The model can make a CLI's shell print its token (SECURITY.md, "A token never leaves
// in output"); a tool result is written by the gateway to another CLI, i.e. to another model. A
// host's tools shared by two agents carried agent A's token, saved by one tool, to agent B's CLI
// verbatim (core scrubbed only its own events): results are scrubbed of every live token now.

// A host with a shared notes store, served to two agents (a very ordinary pair of tools).
const notes: Array<string> = []
const SaveNote = Tool.make("save_note", {
  description: "Save a note for the team.",
  input: { text: Schema.String },
  output: Schema.Struct({ saved: Schema.Boolean })
})
const ReadNotes = Tool.make("read_notes", {
  description: "Read the team's notes.",
  input: {},
  output: Schema.Struct({ notes: Schema.Array(Schema.String) })
})
const NotesTools = Toolkit.make(SaveNote, ReadNotes)
const NotesLive = NotesTools.toLayer({
  save_note: ({ text }) => Effect.sync(() => (notes.push(text), { saved: true })),
  read_notes: () => Effect.sync(() => ({ notes: [...notes] }))
})

describe("live tokens in tool results", () => {
  it.live("a live token of agent A in a tool result reaches agent B's CLI as the marker, never as the token", () =>
    Effect.gen(function*() {
      const gateway = yield* Gateway.Gateway
      const executor = yield* Toolkit.executor(NotesTools)
      const a = yield* gateway.register(executor)
      const b = yield* gateway.register(executor)
      const tokenA = remember(a.token)
      remember(b.token)
      const clientA = yield* connect(a.url, a.token)
      const clientB = yield* connect(b.url, b.token)

      // A's model (prompt-injected) saves the token its shell printed.
      yield* Effect.promise(() => clientA.callTool({ name: "save_note", arguments: { text: `env: X=${tokenA}` } }))
      const read = yield* Effect.promise(() => clientB.callTool({ name: "read_notes", arguments: {} }))
      const sentToB = JSON.stringify(read)

      // The token B's CLI received is still live: B can call A's tools with it.
      const stolen = yield* connect(a.url, Redacted.make(tokenA))
      const served = yield* Effect.promise(() => stolen.listTools())
      expect(served.tools.length).toBe(2)

      expect({
        resultHasToken: sentToB.includes(tokenA),
        resultHasMarker: sentToB.includes(Gateway.redactionMarker)
      }).toEqual({ resultHasToken: false, resultHasMarker: true })
    }).pipe(Effect.scoped, Effect.provide([NotesLive, Gateway.layer()]), Effect.provide(logLayer)))
})

afterAll(() => expectNoTokenInLogs())
