// What a live thread watches after each commit (the session's late writes): the clone's files of
// one session, found by walking only where the layout's session globs may reach.
import { describe, expect, it } from "@effect/vitest"
import * as ProfileLayout from "@tether/profile/ProfileLayout"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Live from "../src/internal/live.js"

const session = "0f6e2c1a-5b1d-4d7e-9f00-1234567890ab"

// Session entries are under `sessions/`, named by their session; `sessionOf` reads the name
// wherever the file is, as a provider's layout may.
const layout = ProfileLayout.make({
  provider: "fake",
  selectorEnv: [],
  nativeDefault: () => "/nowhere",
  classes: { settings: [], mcp: [], skills: ["skills"], auth: [], sessions: ["sessions/**"] },
  reserved: [],
  siblings: [],
  sessionOf: (path) => /([0-9a-f-]{36})\.jsonl$/.exec(path)?.[1]
})

describe("Live.sessionFiles", () => {
  it("lists the session's files under the session globs: a file named like one elsewhere is not", () => {
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-live-files-"))
    try {
      const write = (rel: string) => {
        Fs.mkdirSync(Path.dirname(Path.join(dir, rel)), { recursive: true })
        Fs.writeFileSync(Path.join(dir, rel), "{}\n")
      }
      write(`sessions/2026/12/01/rollout-${session}.jsonl`)
      write(`sessions/2026/12/01/rollout-ffffffff-5b1d-4d7e-9f00-1234567890ab.jsonl`)
      // Named like the session's, outside the globs: never a session entry (nor saved).
      write(`skills/notes/${session}.jsonl`)
      write(`log/${session}.jsonl`)
      expect(Array.from(Live.sessionFiles(dir, layout, session).keys())).toEqual([
        `sessions/2026/12/01/rollout-${session}.jsonl`
      ])
    } finally {
      Fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})
