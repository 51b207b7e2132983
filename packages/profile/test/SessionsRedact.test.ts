// Session entries saved through `Owner.redactSession` (core passes the gateway's token
// redactor) and later deleted by the clone.
// Profile.ts SessionSync.removed: "Entries the clone deleted, removed from the store (unless
// another clone changed them since)."
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Scope from "effect/Scope"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import * as Profile from "../src/Profile.js"
import { sessionLayout } from "./fixtures/sessions.js"
import { tempDir, write } from "./fixtures/tree.js"

const run = <A, E>(effect: Effect.Effect<A, E, NodeContext.NodeContext | Scope.Scope>) =>
  effect.pipe(Effect.scoped, Effect.provide(NodeContext.layer))

/** Replaces `SECRET` by `XXXXXX` (same length, like the gateway's redactor). */
const redact = (content: Uint8Array): Uint8Array => {
  const text = Buffer.from(content).toString("latin1")
  return text.includes("SECRET") ? Buffer.from(text.replaceAll("SECRET", "XXXXXX"), "latin1") : content
}

describe("session store with a redacting owner", () => {
  it.live("an entry saved redacted and then deleted by the clone is removed from the store", () =>
    run(Effect.gen(function*() {
      const base = yield* tempDir("tether-profile-redact-")
      const source = NodePath.join(base, "source")
      NodeFs.mkdirSync(source)
      const selection = Profile.cloneFrom(source, NodePath.join(base, "clones"), {
        sessions: NodePath.join(base, "sessions")
      })
      const owner = { agentId: "r-1", identity: "fake:redact", redactSession: redact }
      const clone = yield* Profile.clone(selection, sessionLayout(source), owner)
      const stored = () => NodePath.join(clone.sessions!, "profile", "sessions", "s.jsonl")

      // Control: an entry with nothing to redact is removed from the store once the clone deletes it.
      write(clone.dir, "sessions/s.jsonl", "{\"text\":\"plain\"}\n")
      expect((yield* clone.saveSessions).saved).toEqual(["sessions/s.jsonl"])
      NodeFs.rmSync(NodePath.join(clone.dir, "sessions/s.jsonl"))
      expect(yield* clone.saveSessions).toEqual({ saved: [], removed: ["sessions/s.jsonl"] })
      expect(NodeFs.existsSync(stored())).toBe(false)

      // The same with a transcript in which the CLI printed a credential.
      write(clone.dir, "sessions/s.jsonl", "{\"text\":\"env: TOKEN=SECRET\"}\n")
      expect((yield* clone.saveSessions).saved).toEqual(["sessions/s.jsonl"])
      expect(NodeFs.readFileSync(stored(), "utf8")).toBe("{\"text\":\"env: TOKEN=XXXXXX\"}\n")
      NodeFs.rmSync(NodePath.join(clone.dir, "sessions/s.jsonl"))
      const second = yield* clone.saveSessions
      expect({ removed: second.removed, inStore: NodeFs.existsSync(stored()) }).toEqual({
        removed: ["sessions/s.jsonl"],
        inStore: false
      })
    })))
})
