import { describe, expect, it } from "@effect/vitest"
import * as ProfileLayout from "../src/ProfileLayout.js"

const layout = ProfileLayout.make({
  provider: "fake",
  selectorEnv: ["FAKE_HOME"],
  nativeDefault: (env) => `${env["HOME"]}/.fake`,
  classes: {
    settings: ["settings.json", "conf/*.toml", "**/*.settings"],
    mcp: ["mcp.json", "settings.json"],
    skills: ["skills"],
    auth: ["auth.json", "credentials/?ey*"]
  },
  reserved: ["tether/**"],
  siblings: ["home", "tmp"]
})

describe("ProfileLayout", () => {
  it("classifies entries by glob, with auth before mcp before settings before skills", () => {
    expect(ProfileLayout.classify(layout, "auth.json")).toBe("auth")
    expect(ProfileLayout.classify(layout, "credentials/key")).toBe("auth")
    expect(ProfileLayout.classify(layout, "credentials/keys.json")).toBe("auth")
    expect(ProfileLayout.classify(layout, "credentials/k")).toBeUndefined()
    expect(ProfileLayout.classify(layout, "settings.json")).toBe("mcp")
    expect(ProfileLayout.classify(layout, "conf/a.toml")).toBe("settings")
    expect(ProfileLayout.classify(layout, "conf/sub/a.toml")).toBeUndefined()
    expect(ProfileLayout.classify(layout, "a/b/c.settings")).toBe("settings")
    expect(ProfileLayout.classify(layout, "x.settings")).toBe("settings")
    expect(ProfileLayout.classify(layout, "sessions/2026/x.jsonl")).toBeUndefined()
  })

  it("a pattern naming a directory covers its subtree; `*` and `?` stay inside one segment", () => {
    expect(ProfileLayout.classify(layout, "skills/a/SKILL.md")).toBe("skills")
    expect(ProfileLayout.classify(layout, "skillsx/a")).toBeUndefined()
    expect(ProfileLayout.matches(["a/*"], "a/b/c")).toBe(true)
    expect(ProfileLayout.matches(["a/*.md"], "a/b/c.md")).toBe(false)
    expect(ProfileLayout.matches(["a?c"], "a/c")).toBe(false)
    expect(ProfileLayout.matches(["a?c"], "abc")).toBe(true)
  })

  it("treats regular-expression characters literally", () => {
    expect(ProfileLayout.matches(["a.json"], "aXjson")).toBe(false)
    expect(ProfileLayout.matches(["[x](y)+.json"], "[x](y)+.json")).toBe(true)
    expect(ProfileLayout.matches(["$^{}|\\"], "$^{}|\\")).toBe(true)
  })

  it("mayHoldSessions: the directories the session globs may reach, and no other", () => {
    const sessions = ProfileLayout.make({
      provider: "fake",
      selectorEnv: [],
      nativeDefault: () => "/nowhere",
      classes: {
        settings: [],
        mcp: [],
        skills: [],
        auth: [],
        sessions: ["sessions/**", ".gemini/tmp/*/chats/**", "projects.json"]
      },
      reserved: [],
      siblings: []
    })
    expect(["sessions", "sessions/2026/12", ".gemini", ".gemini/tmp", ".gemini/tmp/abc", ".gemini/tmp/abc/chats"].map(
      (dir) => ProfileLayout.mayHoldSessions(sessions, dir)
    )).toEqual([true, true, true, true, true, true])
    expect(["skills", "skills/.system", "log", ".gemini/tmp/abc/logs", ".gemini/history"].map(
      (dir) => ProfileLayout.mayHoldSessions(sessions, dir)
    )).toEqual([false, false, false, false, false])
    expect(ProfileLayout.mayHoldSessions(layout, "sessions")).toBe(false)
  })

  it("reserved names", () => {
    expect(ProfileLayout.isReserved(layout, "tether/mcp.json")).toBe(true)
    expect(ProfileLayout.isReserved(layout, "tether")).toBe(true)
    expect(ProfileLayout.isReserved(layout, "tetherx")).toBe(false)
  })

  it("native default comes from the given environment", () => {
    expect(layout.nativeDefault({ HOME: "/home/u" })).toBe("/home/u/.fake")
  })
})
