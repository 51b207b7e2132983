import { describe, expect, it } from "@effect/vitest"
import * as Path from "node:path"
import { checkBoundaries, readWorkspace } from "../scripts/boundaries.js"

const root = Path.resolve(import.meta.dirname, "..")

describe("import boundaries (DESIGN.md §1)", () => {
  it("the workspace has no violation", () => {
    const files = readWorkspace(root)
    expect(files.length).toBeGreaterThan(0)
    expect(checkBoundaries(files)).toEqual([])
  })

  it("flags each kind of violation with the offending import", () => {
    const violations = checkBoundaries([
      { pkg: "tool", path: "src/Tool.ts", text: `import { Agent } from "@tether/core"` },
      { pkg: "core", path: "src/Agent.ts", text: `import * as X from "@tether/gateway/internal/server"` },
      { pkg: "core", path: "src/Run.ts", text: `import { Claude } from "@tether/drivers"` },
      { pkg: "drivers", path: "src/Claude.ts", text: `export { fake } from "@tether/testing"` },
      { pkg: "profile", path: "src/Profile.ts", text: `import { helper } from "../test/helper.js"` },
      { pkg: "gateway", path: "src/Gateway.ts", text: `import { x } from "../../tool/src/internal/x.js"` },
      { pkg: "core", path: "test/Agent.test.ts", text: `import { Claude } from "@tether/drivers"` },
      { pkg: "gateway", path: "src/Gateway.ts", text: `import type { Tool } from "@tether/tool/Tool"` }
    ])
    expect(violations.map((v) => `${v.file} ${v.specifier}`)).toEqual([
      "tool/src/Tool.ts @tether/core",
      "core/src/Agent.ts @tether/gateway/internal/server",
      "core/src/Run.ts @tether/drivers",
      "drivers/src/Claude.ts @tether/testing",
      "profile/src/Profile.ts ../test/helper.js",
      "gateway/src/Gateway.ts ../../tool/src/internal/x.js"
    ])
  })
})
