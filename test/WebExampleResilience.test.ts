/**
 * The web example as a user runs it (real Claude Code CLI offline against the scripted
 * model, headless Chromium), with a TCP proxy between the browser and the server so a turn's SSE
 * connection can be dropped mid-stream.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { type ChildProcess, spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import { type Browser, chromium } from "playwright-core"

const root = Path.resolve(import.meta.dirname, "..")

let server: ChildProcess
let output = ""
let origin = ""
let token = ""
let proxyOrigin = ""
let browser: Browser
let tmp = ""
let proxy: Net.Server
let exited: Promise<{ readonly code: number | null; readonly signal: string | null }>
// Set by a test: the next turn response through the proxy is cut once it carried this text.
let cutTurnAfter: string | undefined
let cutHead = false
// Set by a test: the next turn request through the proxy has its connection dropped before any byte of the answer.
let dropBeforeAnswer = false
const cuts: Array<string> = []
const sockets = new Set<Net.Socket>()

beforeAll(async () => {
  tmp = Fs.mkdtempSync(Path.join(process.env["TETHER_SYSTEM_TMPDIR"] ?? Os.tmpdir(), "tether-webproxy-"))
  Fs.mkdirSync(Path.join(tmp, "t"))
  server = spawn(
    process.execPath,
    ["--conditions=@tether/source", "--import", "tsx", Path.join("examples", "web", "server.ts")],
    {
      cwd: root,
      env: { ...process.env, NO_COLOR: "1", TMPDIR: Path.join(tmp, "t") },
      stdio: ["ignore", "pipe", "pipe"],
      timeout: 110_000,
      killSignal: "SIGKILL"
    }
  )
  exited = new Promise((resolve) => server.on("close", (code, signal) => resolve({ code, signal })))
  server.stdout!.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")))
  server.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")))
  for (;;) {
    const found = /open (http:\/\/127\.0\.0\.1:(\d+))\/#token=(\S+)/.exec(output)
    if (found !== null) {
      origin = found[1]!
      token = found[3]!
      break
    }
    if (server.exitCode !== null) throw new Error(`the example server exited:\n${output}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  const port = Number(new URL(origin).port)
  proxy = Net.createServer((client) => {
    const upstream = Net.connect(port, "127.0.0.1")
    sockets.add(client)
    sockets.add(upstream)
    let request = ""
    let response = ""
    client.on("data", (chunk) => {
      const line = /^(GET|POST|DELETE) \S+ HTTP/m.exec(chunk.toString("latin1"))
      if (line !== null) {
        request = line[0]
        response = ""
      }
      upstream.write(chunk)
    })
    upstream.on("data", (chunk) => {
      response += chunk.toString("latin1")
      if (dropBeforeAnswer && /^POST \/api\/threads\/[^/]+\/turns /.test(request)) {
        dropBeforeAnswer = false
        cuts.push(response)
        client.destroy()
        upstream.destroy()
        return
      }
      if (
        cutTurnAfter !== undefined && /^POST \/api\/threads\/[^/]+\/turns /.test(request) &&
        response.includes(cutTurnAfter)
      ) {
        // Forward up to the end of the frame that carried the marker, then drop the connection.
        const at = response.indexOf(cutTurnAfter)
        const end = cutTurnAfter === "\r\n\r\n" ? at + 2 : response.indexOf("\n\n", at)
        // `cutHead`: the response's whole head is forwarded, nothing of its body.
        if (cutHead) {
          const head = response.indexOf("\r\n\r\n")
          const sent = response.length - chunk.length
          cutTurnAfter = undefined
          cutHead = false
          if (head !== -1 && head + 4 - sent > 0) client.write(chunk.subarray(0, head + 4 - sent))
          cuts.push(response)
          // Flushed, then closed: the browser has the head, then the connection ends.
          client.end()
          upstream.destroy()
          return
        }
        cutTurnAfter = undefined
        if (end !== -1) {
          const sent = response.length - chunk.length
          const upTo = end + 2 - sent
          if (upTo > 0) client.write(chunk.subarray(0, upTo))
        }
        cuts.push(response)
        client.destroy()
        upstream.destroy()
        return
      }
      client.write(chunk)
    })
    const close = () => {
      client.destroy()
      upstream.destroy()
      sockets.delete(client)
      sockets.delete(upstream)
    }
    client.on("close", close)
    upstream.on("close", close)
    client.on("error", close)
    upstream.on("error", close)
  })
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve))
  proxyOrigin = `http://127.0.0.1:${(proxy.address() as Net.AddressInfo).port}`
  browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
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
  try {
    await Promise.race([browser?.close(), new Promise((resolve) => setTimeout(resolve, 10_000))]).catch(() => undefined)
    for (const socket of sockets) socket.destroy()
    proxy?.close()
    // Still running (a filtered run skipped the SIGINT test): stopped as a user stops it, so it
    // closes its agent and removes its clone; killed only if it does not exit.
    if (server !== undefined && server.exitCode === null && server.signalCode === null) {
      server.kill("SIGTERM")
      const stopped = await Promise.race([
        exited.then(() => true),
        new Promise((r) => setTimeout(() => r(false), 10_000))
      ])
      if (!stopped) server.kill("SIGKILL")
    }
    await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 10_000))])
  } finally {
    if (tmp !== "") Fs.rmSync(tmp, { recursive: true, force: true })
  }
}, 30_000)

const api = (key: string) => `${origin}/api/threads/${encodeURIComponent(key)}`
const auth = () => ({ authorization: `Bearer ${token}` })
const answer =
  "ISSUE-42 (\"Login fails on Safari\") is open. I could not close it (permission_denied): a maintainer has to."

/** The SSE frames of a text (id, event). */
const frames = (text: string) =>
  text.split("\n\n").flatMap((block) => {
    let id: string | undefined
    let event: string | undefined
    for (const line of block.split("\n")) {
      if (line.startsWith("id: ")) id = line.slice(4)
      if (line.startsWith("event: ")) event = line.slice(7)
    }
    return event === undefined ? [] : [{ id, event }]
  })

describe("the web example in headless Chromium, through a proxy that drops connections", () => {
  it(
    "a turn's SSE connection dropped mid-run: the page reconnects with Last-Event-ID, nothing lost or doubled",
    async () => {
      const context = await browser.newContext()
      const page = await context.newPage()
      // Every event the page's reader sees, in order.
      await page.goto(`${proxyOrigin}/#token=${token}`)
      cutTurnAfter = "event: ToolCall"
      await page.fill("#question", "Is ISSUE-42 still open? If it has been fixed, close it.")
      await page.click("#send")
      await page.waitForSelector("[data-role=finished], [data-role=error]", { timeout: 60_000 })
      expect(cuts.length).toBe(1)
      const errors = await page.locator("[data-role=error]").allInnerTexts()
      expect(errors).toEqual([])
      expect(await page.locator("[data-role=tool][data-tool=lookup_issue]").count()).toBe(1)
      expect(await page.locator("[data-role=tool][data-tool=close_issue]").count()).toBe(1)
      expect(await page.locator("[data-role=tool-output]").count()).toBe(1)
      expect(await page.locator("[data-role=tool-rejected]").count()).toBe(1)
      expect(await page.locator("[data-role=finished]").count()).toBe(1)
      const answers = await page.locator("[data-role=assistant]").allInnerTexts()
      expect(answers).toEqual([
        "Let me look ISSUE-42 up.",
        "It is still open; let me try to close it.",
        answer
      ])
      await context.close()
    },
    90_000
  )

  // Cut right after an event, or before any byte of the answer (the page, or Chromium on its own,
  // sends the POST again with the message's id and reads the run it started).
  for (const marker of ["event: TextDelta", "event: Message", undefined]) {
    it(
      marker === undefined
        ? "a turn's POST dropped before any byte of its answer: sent again with its id, the page shows the one run it started"
        : `a turn's connection dropped right after ${JSON.stringify(marker)}: the page shows the whole run once`,
      async () => {
        const context = await browser.newContext()
        const page = await context.newPage()
        await page.goto(`${proxyOrigin}/#token=${token}`)
        const key = await page.locator("#thread").innerText()
        const before = cuts.length
        if (marker === undefined) dropBeforeAnswer = true
        else cutTurnAfter = marker
        await page.fill("#question", "Is ISSUE-42 still open? If it has been fixed, close it.")
        await page.click("#send")
        // The run's end: Send again (while the run goes on it is Steer, enabled).
        await page.waitForSelector("#send:text-is('Send'):not([disabled])", { timeout: 60_000 })
        expect(cuts.length).toBe(before + 1)
        expect(await page.locator("[data-role=error]").allInnerTexts()).toEqual([])
        expect(await page.locator("[data-role=finished]").count()).toBe(1)
        expect(await page.locator("[data-role=tool]").count()).toBe(2)
        expect((await page.locator("[data-role=assistant]").allInnerTexts()).at(-1)).toBe(answer)
        // The server ran the turn once.
        const snapshot = (await (await fetch(api(key), { headers: auth() })).json()) as { turns?: number }
        expect(snapshot.turns).toBe(1)
        await context.close()
      },
      90_000
    )
  }

  it(
    "a turn's connection dropped after the response's head, before its first event: the page shows the run or an error, not nothing",
    async () => {
      const context = await browser.newContext()
      const page = await context.newPage()
      await page.goto(`${proxyOrigin}/#token=${token}`)
      const key = await page.locator("#thread").innerText()
      const before = cuts.length
      cutTurnAfter = "\r\n\r\n"
      cutHead = true
      await page.fill("#question", "Is ISSUE-42 still open? If it has been fixed, close it.")
      await page.click("#send")
      await page.waitForSelector("#send:text-is('Send'):not([disabled])", { timeout: 60_000 })
      expect(cuts.length).toBe(before + 1)
      // The turn went on in the server: its run is (or was) there to be read.
      let snapshot: { turns?: number; run?: string } = {}
      for (let i = 0; i < 100; i++) {
        snapshot = (await (await fetch(api(key), { headers: auth() })).json()) as { turns?: number; run?: string }
        if (snapshot.turns === 1 && snapshot.run === undefined) break
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
      expect(snapshot.turns).toBe(1)
      const shown = {
        log: await page.locator("#log").innerText(),
        finished: await page.locator("[data-role=finished]").count(),
        errors: await page.locator("[data-role=error]").count(),
        status: await page.locator("#status").innerText()
      }
      // The page is "ready" again: it must show the run the server ran, or why it could not.
      expect(shown.finished + shown.errors, JSON.stringify(shown)).toBeGreaterThan(0)
      await context.close()
    },
    90_000
  )

  it(
    "two tabs on one thread key: the second ask while the first runs is a clear 409, then both turns are kept",
    async () => {
      const key = `web-two-tabs-${Date.now()}`
      const context = await browser.newContext()
      // The page's own code, run in the browser (whose globals this file's types do not have).
      await context.addInitScript(
        (k) =>
          (globalThis as unknown as { sessionStorage: { setItem(n: string, v: string): void } }).sessionStorage.setItem(
            "tether-thread",
            k
          ),
        key
      )
      const one = await context.newPage()
      const two = await context.newPage()
      await one.goto(`${origin}/#token=${token}`)
      await two.goto(`${origin}/#token=${token}`)
      expect(await one.locator("#thread").innerText()).toBe(key)
      expect(await two.locator("#thread").innerText()).toBe(key)
      await one.fill("#question", "Is ISSUE-42 still open?")
      await one.click("#send")
      // Running: the Stop button is enabled once RunStarted arrived.
      await one.waitForSelector("#stop:not([disabled])", { timeout: 30_000 })
      await two.fill("#question", "Is ISSUE-7 still open?")
      await two.click("#send")
      await two.waitForSelector("[data-role=finished], [data-role=error]", { timeout: 60_000 })
      expect(await two.locator("[data-role=error]").allInnerTexts()).toEqual([
        "409: A turn is already running on this thread."
      ])
      await one.waitForSelector("[data-role=finished], [data-role=error]", { timeout: 60_000 })
      expect(await one.locator("[data-role=error]").count()).toBe(0)
      await two.fill("#question", "Is ISSUE-7 still open?")
      await two.click("#send")
      await two.waitForSelector("[data-role=finished]", { timeout: 60_000 })
      expect((await two.locator("[data-role=assistant]").allInnerTexts()).at(-1)).toBe(
        "ISSUE-7 (\"Dark mode flickers\") is closed."
      )
      const snapshot = (await (await fetch(api(key), { headers: auth() })).json()) as { turns?: number; run?: string }
      expect(snapshot).toMatchObject({ key, turns: 2 })
      await context.close()
    },
    120_000
  )

  it("Stop while a turn runs: the page shows the canceled run and can ask again", async () => {
    const context = await browser.newContext()
    const page = await context.newPage()
    await page.goto(`${origin}/#token=${token}`)
    await page.fill("#question", "Is ISSUE-42 still open?")
    await page.click("#send")
    await page.waitForSelector("#stop:not([disabled])", { timeout: 30_000 })
    await page.click("#stop")
    await page.waitForSelector("[data-role=finished], [data-role=error]", { timeout: 60_000 })
    const errors = await page.locator("[data-role=error]").allInnerTexts()
    const finished = await page.locator("[data-role=finished]").count()
    // Either the Stop came in time (canceled) or the run had already finished: never anything else.
    expect(errors.length === 0 ? finished : errors).toSatisfy((x: unknown) =>
      x === 1 || (Array.isArray(x) && x.length === 1 && /^The run ended: canceled/.test(x[0]))
    )
    expect(await page.locator("#send").isEnabled()).toBe(true)
    await context.close()
  }, 90_000)

  it("malformed requests from the page's API get a clear 4xx", async () => {
    const key = `web-bad-${Date.now()}`
    const post = (path: string, body: string | Uint8Array, type?: string) =>
      fetch(`${api(key)}${path}`, {
        method: "POST",
        headers: { ...auth(), ...(type === undefined ? {} : { "content-type": type }) },
        body
      })
    const results: Record<string, number> = {}
    results.badJson = (await post("/turns", "{\"input\": ", "application/json")).status
    results.wrongType = (await post("/turns", JSON.stringify({ input: "hi" }), "text/plain")).status
    results.noType = (await post("/turns", JSON.stringify({ input: "hi" }))).status
    results.wrongShape = (await post("/turns", JSON.stringify({ question: "hi" }), "application/json")).status
    results.huge = (await post("/turns", JSON.stringify({ input: "x".repeat(2 * 1024 * 1024) }), "application/json"))
      .status
    results.foreignKey = (await fetch(`${origin}/api/threads/other-key/turns`, {
      method: "POST",
      headers: { ...auth(), "content-type": "application/json" },
      body: JSON.stringify({ input: "hi" })
    })).status
    results.unknownThread = (await fetch(api(key), { headers: auth() })).status
    results.unknownRunEvents = (await fetch(`${api(key)}/runs/nope/events`, { headers: auth() })).status
    results.unknownRunDelete = (await fetch(`${api(key)}/runs/nope`, { method: "DELETE", headers: auth() })).status
    results.unknownRunInput =
      (await post("/runs/nope/input", JSON.stringify({ input: "more" }), "application/json")).status
    results.badPath = (await fetch(`${origin}/api/threads/%E0%A4%A/turns`, {
      method: "POST",
      headers: { ...auth(), "content-type": "application/json" },
      body: JSON.stringify({ input: "hi" })
    })).status
    results.resumeOnlyNew = await (async () => {
      const response = await post("/turns", JSON.stringify({ input: "hi", resumeOnly: true }), "application/json")
      const text = await response.text()
      return response.status === 200 ? (frames(text).at(-1)?.event === "RunFinished" ? 200 : -1) : response.status
    })()
    expect(results).toEqual({
      badJson: 400,
      wrongType: 415,
      noType: 415,
      wrongShape: 400,
      huge: 413,
      foreignKey: 404,
      unknownThread: 404,
      unknownRunEvents: 404,
      unknownRunDelete: 404,
      unknownRunInput: 404,
      badPath: 400,
      resumeOnlyNew: 404
    })
  }, 60_000)

  it("an empty input and input sent into a running turn get a clear answer, never a 500 or a hang", async () => {
    const key = `web-odd-${Date.now()}`
    const empty = await fetch(`${api(key)}/turns`, {
      method: "POST",
      headers: { ...auth(), "content-type": "application/json" },
      body: JSON.stringify({ input: "" }),
      signal: AbortSignal.timeout(45_000)
    })
    const emptyText = await empty.text()
    expect(
      empty.status === 400 || (empty.status === 200 && frames(emptyText).at(-1)?.event === "RunFinished"),
      emptyText
    )
      .toBe(true)

    // Steering: start a turn, read until RunStarted, POST input into it.
    const controller = new AbortController()
    const turn = await fetch(`${api(key)}/turns`, {
      method: "POST",
      headers: { ...auth(), "content-type": "application/json" },
      body: JSON.stringify({ input: "Is ISSUE-42 still open?" }),
      signal: controller.signal
    })
    expect(turn.status).toBe(200)
    const reader = turn.body!.getReader()
    let text = ""
    let runId: string | undefined
    while (runId === undefined) {
      const { done, value } = await reader.read()
      if (done) break
      text += new TextDecoder().decode(value)
      runId = /"runId":"([^"]+)"/.exec(text)?.[1]
    }
    expect(runId).toBeDefined()
    const input = await fetch(`${api(key)}/runs/${runId}/input`, {
      method: "POST",
      headers: { ...auth(), "content-type": "application/json" },
      body: JSON.stringify({ input: "Also check ISSUE-7." })
    })
    const inputBody = await input.text()
    expect([200, 409], inputBody).toContain(input.status)
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      text += new TextDecoder().decode(value)
    }
    const events = frames(text).map((f) => f.event)
    expect(events.at(-1)).toBe("RunFinished")
    if (input.status === 200) expect(events).toContain("InputDelivered")
  }, 90_000)

  it("SIGINT with a page mid-turn: the server exits promptly, nothing left behind, no temp dir", async () => {
    const context = await browser.newContext()
    const page = await context.newPage()
    await page.goto(`${origin}/#token=${token}`)
    await page.fill("#question", "Is ISSUE-42 still open?")
    await page.click("#send")
    await page.waitForSelector("#stop:not([disabled])", { timeout: 30_000 })
    const sent = Date.now()
    server.kill("SIGINT")
    const { code, signal } = await exited
    const took = Date.now() - sent
    expect({ code, signal }, output).toEqual({ code: 0, signal: null })
    expect(took, output).toBeLessThan(15_000)
    expect(output).toMatch(/^✓ nothing left behind$/m)
    // tsx's own cache (tsx-<uid>) is not the example's.
    expect(Fs.readdirSync(Path.join(tmp, "t")).filter((name) => !name.startsWith("tsx-"))).toEqual([])
    await page.waitForSelector("[data-role=error]", { timeout: 10_000 })
    expect(await page.locator("[data-role=error]").allInnerTexts()).toEqual(["The run ended: canceled (Canceled)."])
    await context.close()
  }, 60_000)
})
