/**
 * The web example in a real browser: the example server runs as a user runs it (the real Claude
 * Code CLI, offline against the scripted model), headless Chromium (Debian's `chromium`, which
 * `.ci/run` installs; driven by `playwright-core`, no browser download) opens its page, asks a
 * question, and the page shows the tool calls, the rejection and the final answer. A screenshot
 * is saved in the test's temp dir. Bounded: the server is killed after 100 s.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { type ChildProcess, spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { type Browser, chromium } from "playwright-core"

const root = Path.resolve(import.meta.dirname, "..")
const chromiumPath = "/usr/bin/chromium"

let server: ChildProcess
let output = ""
let url = ""
let browser: Browser
let exited: Promise<{ readonly code: number | null; readonly signal: string | null }>

beforeAll(async () => {
  server = spawn(
    process.execPath,
    ["--conditions=@tether/source", "--import", "tsx", Path.join("examples", "web", "server.ts")],
    {
      cwd: root,
      env: { ...process.env, NO_COLOR: "1" },
      stdio: ["ignore", "pipe", "pipe"],
      timeout: 100_000,
      killSignal: "SIGKILL"
    }
  )
  exited = new Promise((resolve) => server.on("close", (code, signal) => resolve({ code, signal })))
  server.stdout!.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")))
  server.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")))
  while (url === "") {
    const found = /open (http:\/\/127\.0\.0\.1:\d+\/#token=\S+)/.exec(output)
    if (found !== null) url = found[1]!
    else if (server.exitCode !== null) throw new Error(`the example server exited:\n${output}`)
    else await new Promise((resolve) => setTimeout(resolve, 50))
  }
  browser = await chromium.launch({
    executablePath: chromiumPath,
    // The closed network: no background connections, no component updates.
    args: [
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync"
    ]
  })
}, 90_000)

afterAll(async () => {
  await browser?.close()
  if (server !== undefined && server.exitCode === null) server.kill("SIGTERM")
  await exited
})

describe("the web example in headless Chromium", () => {
  it("a question shows the streamed answer, each tool call with input and output, and the rejection", async () => {
    const page = await browser.newPage({ viewport: { width: 1100, height: 760 } })
    await page.goto(url)
    await page.fill("#question", "Is ISSUE-42 still open? If it has been fixed, close it.")
    await page.click("#send")
    await page.waitForSelector("[data-role=finished], [data-role=error]", { timeout: 60_000 })
    expect(await page.locator("[data-role=error]").count()).toBe(0)

    const lookup = page.locator("[data-role=tool][data-tool=lookup_issue]")
    expect(await lookup.locator("[data-role=tool-input]").innerText()).toContain("\"ISSUE-42\"")
    expect(await lookup.locator("[data-role=tool-output]").innerText()).toContain("Login fails on Safari")
    const close = page.locator("[data-role=tool][data-tool=close_issue]")
    expect(await close.locator("[data-role=tool-rejected]").innerText()).toContain("permission_denied")
    const answers = await page.locator("[data-role=assistant]").allInnerTexts()
    expect(answers.at(-1)).toBe(
      "ISSUE-42 (\"Login fails on Safari\") is open. I could not close it (permission_denied): a maintainer has to."
    )
    expect(await page.locator("#send").isEnabled()).toBe(true)

    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-web-"))
    const screenshot = Path.join(dir, "chat.png")
    await page.screenshot({ path: screenshot, fullPage: true })
    expect(Fs.statSync(screenshot).size).toBeGreaterThan(10_000)
    await page.close()
  }, 90_000)

  it("a message sent while the turn runs steers it: delivered into the turn, which ends once", async () => {
    const page = await browser.newPage()
    await page.goto(url)
    await page.fill("#question", "Is ISSUE-42 still open? If it has been fixed, close it.")
    await page.click("#send")
    // The turn has started (the CLI starting, then three model requests and two tool calls to
    // go): Send has become Steer.
    await page.waitForSelector("#send:text-is('Steer')", { timeout: 60_000 })
    await page.fill("#question", "Please keep the answer short.")
    await page.click("#send")
    const delivered = page.locator("[data-role=delivered], [data-role=error]").first()
    await delivered.waitFor({ timeout: 30_000 })
    expect(await delivered.innerText()).toMatch(/^↪ delivered to the running turn \((Injected|Queued)\)$/)
    expect(await page.locator("[data-role=steer]").allInnerTexts()).toEqual(["Please keep the answer short."])
    await page.waitForSelector("[data-role=finished]:not([data-role=delivered])", { timeout: 60_000 })
    await page.waitForSelector("#send:not([disabled])", { timeout: 10_000 })
    expect(await page.locator("[data-role=error]").count()).toBe(0)
    expect(await page.locator("[data-role=finished]").count()).toBe(1)
    expect(await page.locator("#send").innerText()).toBe("Send")
    await page.close()
  }, 90_000)

  it("without the token the page shows the server's 401", async () => {
    const page = await browser.newPage()
    await page.goto(url.replace(/#token=.*/, ""))
    await page.fill("#question", "Is ISSUE-42 still open?")
    await page.click("#send")
    const error = page.locator("[data-role=error]")
    await error.waitFor({ timeout: 30_000 })
    expect(await error.innerText()).toBe("401: Authentication is required.")
    await page.close()
  }, 60_000)

  it("the server stops on SIGTERM and leaves nothing behind", async () => {
    await browser.close()
    server.kill("SIGTERM")
    const { code, signal } = await exited
    expect({ code, signal }, output).toEqual({ code: 0, signal: null })
    expect(output).toMatch(/^✓ nothing left behind$/m)
  }, 60_000)
})
