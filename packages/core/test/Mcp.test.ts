import { describe, expect, it } from "@effect/vitest"
import { Mcp } from "@tether/core"
import { validate } from "../src/internal/mcp.js"

const hostedKey = "tether"

describe("Mcp constructors", () => {
  it("build the McpServer shape drivers render, as frozen copies", () => {
    const args = ["server.js"]
    const env = { LEVEL: "debug" }
    const stdio = Mcp.stdio("docs", "/usr/bin/node", args, env)
    args.push("--evil")
    ;(env as Record<string, string>).LEVEL = "trace"
    expect(stdio).toEqual({
      _tag: "stdio",
      key: "docs",
      command: "/usr/bin/node",
      args: ["server.js"],
      env: { LEVEL: "debug" }
    })
    expect(Object.isFrozen(stdio)).toBe(true)
    expect(Object.isFrozen(stdio._tag === "stdio" ? stdio.args : undefined)).toBe(true)
    expect(Mcp.stdio("bare", "srv")).toEqual({ _tag: "stdio", key: "bare", command: "srv", args: [], env: {} })

    const http = Mcp.http("search", "https://mcp.example/mcp", {
      headers: { "X-Team": "core" },
      bearerTokenEnv: "SEARCH_TOKEN",
      tools: ["search"]
    })
    expect(http).toEqual({
      _tag: "http",
      key: "search",
      url: "https://mcp.example/mcp",
      headers: { "X-Team": "core" },
      bearerTokenEnv: "SEARCH_TOKEN",
      tools: ["search"]
    })
    expect(Mcp.sse("legacy", "http://127.0.0.1:9/sse")).toEqual({
      _tag: "sse",
      key: "legacy",
      url: "http://127.0.0.1:9/sse",
      headers: {},
      bearerTokenEnv: undefined
    })
  })
})

describe("Mcp.validate", () => {
  const reason = (source: Mcp.Source) => validate(source, hostedKey)?.reason

  it("accepts well-formed sources", () => {
    expect(validate(Mcp.stdio("docs-1", "node", ["a"], { A_B: "1" }), hostedKey)).toBeUndefined()
    expect(validate(Mcp.http("s_2", "http://127.0.0.1:1/mcp", { bearerTokenEnv: "TOKEN" }), hostedKey))
      .toBeUndefined()
  })

  it("refuses the hosted key in any case and malformed keys", () => {
    expect(reason(Mcp.stdio("tether", "node"))).toBe("ReservedKey")
    expect(reason(Mcp.http("Tether", "http://127.0.0.1:1/mcp"))).toBe("ReservedKey")
    // CLIs would name their tools as hosted ones (`mcp_tether_x_<tool>`, `mcp__tether__x__<tool>`).
    for (const key of ["tether_x", "TETHER__x", "tether_approval"]) {
      expect(reason(Mcp.stdio(key, "node"))).toBe("ReservedKey")
    }
    for (const key of ["tether-x", "tetherx", "x_tether"]) expect(reason(Mcp.stdio(key, "node"))).toBeUndefined()
    for (const key of ["", "a b", "a.b", "x".repeat(65), "é"]) expect(reason(Mcp.stdio(key, "node"))).toBe("InvalidKey")
  })

  it("refuses names that could alias the hosted token variable or the process marker", () => {
    // The gateway names the token variable TETHER_MCP_<random>; the marker is TETHER_AGENT_MARKER.
    expect(reason(Mcp.http("a", "http://127.0.0.1:1/mcp", { bearerTokenEnv: "TETHER_MCP_0123456789ABCDEF01234567" })))
      .toBe("ReservedVariable")
    expect(reason(Mcp.http("a", "http://127.0.0.1:1/mcp", { bearerTokenEnv: "tether_mcp_x" }))).toBe("ReservedVariable")
    expect(reason(Mcp.stdio("a", "node", [], { TETHER_AGENT_MARKER: "x" }))).toBe("ReservedVariable")
    expect(reason(Mcp.stdio("a", "node", [], { TOKEN: "${TETHER_MCP_ABC}" }))).toBe("ReservedVariable")
    expect(reason(Mcp.stdio("a", "node", ["--token=$TETHER_MCP_ABC"]))).toBe("ReservedVariable")
    expect(reason(Mcp.http("a", "http://127.0.0.1:1/mcp", { headers: { "X-T": "Bearer ${env:TETHER_MCP_A}" } })))
      .toBe("ReservedVariable")
    expect(reason(Mcp.http("a", "http://127.0.0.1:1/mcp?t=${TETHER_MCP_A}"))).toBe("ReservedVariable")
    expect(reason(Mcp.http("a", "http://127.0.0.1:1/mcp", { bearerTokenEnv: "1BAD" }))).toBe("InvalidVariable")
    expect(reason(Mcp.stdio("a", "node", [], { "A-B": "x" }))).toBe("InvalidVariable")
  })

  it("refuses malformed transports", () => {
    expect(reason(Mcp.stdio("a", " "))).toBe("InvalidCommand")
    expect(reason(Mcp.stdio("a", "node", ["a\u0000b"]))).toBe("InvalidCommand")
    expect(reason(Mcp.http("a", "not a url"))).toBe("InvalidUrl")
    expect(reason(Mcp.http("a", "ftp://127.0.0.1/x"))).toBe("InvalidUrl")
    expect(reason(Mcp.http("a", "https://user:pw@mcp.example/mcp"))).toBe("InvalidUrl")
    expect(reason(Mcp.http("a", "https://mcp.example", { headers: { "Bad Header": "x" } }))).toBe("InvalidHeader")
    expect(reason(Mcp.http("a", "https://mcp.example", { headers: { "X-A": "a\r\nB: c" } }))).toBe("InvalidHeader")
    expect(
      reason(Mcp.http("a", "https://mcp.example", { headers: { authorization: "Bearer x" }, bearerTokenEnv: "T" }))
    ).toBe("InvalidHeader")
    expect(validate({ ...Mcp.stdio("a", "node"), _tag: "ws" } as unknown as Mcp.Source, hostedKey)?.reason)
      .toBe("InvalidKey")
  })

  it("never echoes a URL's credentials", () => {
    const error = validate(Mcp.http("a", "https://user:hunter2@mcp.example/mcp"), hostedKey)
    expect(error?.message).not.toContain("hunter2")
  })
})
