/**
 * The capabilities table of the drivers guide (docs/drivers.md) says what `Driver.capabilities`
 * of each driver says: every capability row, every driver column.
 */
import { describe, expect, it } from "@effect/vitest"
import type * as Driver from "@tether/core/Driver"
import { Claude, CodeBuddy, Codex, Cursor, Gemini } from "@tether/drivers"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { claudeAgentDriver, codexAgentDriver } from "./AcpHarness.js"

const guide = Fs.readFileSync(Path.join(import.meta.dirname, "..", "..", "..", "docs", "drivers.md"), "utf8")

/** The guide's first table (the one whose header row starts `| |`), as cells (the first cell is the row's label). */
const table = (): ReadonlyMap<string, ReadonlyArray<string>> => {
  const section = guide.slice(guide.indexOf("\n| |") + 1)
  const rows = new Map<string, ReadonlyArray<string>>()
  for (const line of section.split("\n")) {
    if (!line.startsWith("|")) break
    const cells = line.split("|").slice(1, -1).map((cell) => cell.trim())
    rows.set(cells[0]!, cells.slice(1))
  }
  return rows
}

/** A driver of each column, in the table's order. */
const tableDrivers = (): ReadonlyArray<Driver.Driver> => [
  Claude.driver(),
  Codex.driver(),
  Gemini.driver(),
  CodeBuddy.driver(),
  Cursor.driver(),
  claudeAgentDriver("http://127.0.0.1:1"),
  codexAgentDriver("http://127.0.0.1:1/v1")
]

const columns: ReadonlyArray<readonly [string, Driver.Capabilities]> = [
  ["Claude Code", Claude.capabilities],
  ["Codex", Codex.capabilities],
  ["Gemini CLI", Gemini.capabilities],
  ["CodeBuddy Code", CodeBuddy.capabilities],
  ["Cursor", Cursor.capabilities],
  ["ACP: claude-agent-acp", claudeAgentDriver("http://127.0.0.1:1").capabilities],
  ["ACP: codex-acp", codexAgentDriver("http://127.0.0.1:1/v1").capabilities]
]

// A cell states a boolean as `yes` / `no`, optionally followed by how (in parentheses).
const flag = (cell: string): boolean => {
  const word = cell.split(" ")[0]
  if (word !== "yes" && word !== "no") throw new Error(`not a yes/no cell: ${cell}`)
  return word === "yes"
}

const rows: ReadonlyArray<readonly [string, (cell: string, capabilities: Driver.Capabilities) => void]> = [
  ["resume / fork", (cell, c) => expect(cell.split(" / ").map(flag)).toEqual([c.resume, c.fork])],
  ["external MCP transports", (cell, c) => expect(cell.split(", ")).toEqual([...c.mcpTransports])],
  ["instructions", (cell, c) => expect(flag(cell)).toBe(c.instructions)],
  ["per-turn tool allow-list", (cell, c) => expect(flag(cell)).toBe(c.toolAllowList)],
  [
    "sandbox levels",
    (cell, c) => expect(cell === "none (refused)" ? [] : cell.split(", ")).toEqual([...c.sandbox])
  ],
  ["streaming input", (cell, c) => expect(flag(cell)).toBe(c.streamingInput)],
  [
    "per-turn built-in tool policy",
    (cell, c) =>
      expect(cell === "no" ? [] : cell.split(/[:(]/)[0]!.trim().split(", ")).toEqual([...(c.builtinToolPolicy ?? [])])
  ],
  ["native skills projection", (cell, c) => expect(flag(cell)).toBe(c.skillsProjection)],
  // How the driver gets it: `native` or `instruction`, optionally followed by how.
  ["structured output", (cell, c) => expect(cell.split(" ")[0]).toBe(c.structuredOutput)],
  // Where a live thread's attempt runs: `native` / `instruction` on the warm process, `one-shot`
  // beside it; `—` for a driver without a live protocol.
  [
    "structured output on live threads",
    (cell, c) => {
      const word = cell.split(" ")[0]
      expect(word === "—" ? undefined : word === "one-shot" ? "oneShot" : word).toBe(
        c.persistentProcess
          ? (c.liveStructuredOutput ?? (c.structuredOutput === "native" ? "oneShot" : "instruction"))
          : undefined
      )
    }
  ],
  ["persistent process (live sessions)", (cell, c) => expect(flag(cell)).toBe(c.persistentProcess)]
]

describe("the drivers guide's capabilities table", () => {
  it("has one column per driver, in order", () => {
    expect(table().get("")).toEqual(columns.map(([name]) => name))
  })

  for (const [row, check] of rows) {
    it(`row "${row}" is each driver's Driver.capabilities`, () => {
      const cells = table().get(row)
      expect(cells, `the table has no row "${row}"`).toBeDefined()
      columns.forEach(([name, capabilities], index) => {
        try {
          check(cells![index]!, capabilities)
        } catch (error) {
          throw new Error(`${name}, ${row}: ${String(error)}`)
        }
      })
    })
  }

  it("row \"approvals of built-in tools\" is each driver's Driver.approvals (one-shot and live mechanisms)", () => {
    const cells = table().get("approvals of built-in tools ([guide](./approvals.md))")!
    const drivers = tableDrivers()
    expect(drivers.map((driver) => driver.name)).toHaveLength(columns.length)
    drivers.forEach((driver, index) => {
      const cell = cells[index]!
      expect(flag(cell), driver.name).toBe(driver.approvals !== undefined)
      expect(cell.includes("one-shot"), driver.name).toBe(driver.approvals?.tool !== undefined)
      expect(/live/.test(cell), driver.name).toBe(driver.approvals?.live === true)
      expect(cell.includes("live threads only"), driver.name).toBe(
        driver.approvals?.live === true && driver.approvals.tool === undefined
      )
    })
  })

  it("a driver offers a live protocol exactly when it declares a persistent process", () => {
    for (const driver of tableDrivers()) {
      expect(driver.capabilities.persistentProcess).toBe(driver.live !== undefined)
    }
  })
})
