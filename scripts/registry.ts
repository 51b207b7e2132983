/**
 * A loopback npm registry for the packaging test: npm installs Tether's packed tarballs into a
 * fresh app as it would from npmjs.org, resolving every range itself, but offline. It serves
 *
 * - the packages of the repository's `package-lock.json` (every version the lock holds, with the
 *   manifest fields the lock records: dependencies, peers, optional dependencies, bin, os/cpu…),
 *   their tarballs read from the npm cache by the lock's integrity (`npm ci` put them there);
 * - the packed `@tether/*` tarballs given to `start`.
 *
 * A package or version it does not have is a 404, so an install that needs the network fails.
 */
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import * as Path from "node:path"

interface Version {
  readonly manifest: { readonly [field: string]: unknown }
  readonly integrity: string
  /** The tarball on disk. */
  readonly file: string
}

/** Manifest fields the lock file records and npm reads from a packument. */
const manifestFields = [
  "dependencies",
  "optionalDependencies",
  "peerDependencies",
  "peerDependenciesMeta",
  "bin",
  "engines",
  "os",
  "cpu",
  "libc",
  "hasInstallScript",
  "license",
  "deprecated"
] as const

/** Where cacache keeps a content blob: `content-v2/<algorithm>/<hex[0:2]>/<hex[2:4]>/<hex[4:]>`. */
const cachedFile = (cache: string, integrity: string): string | undefined => {
  for (const hash of integrity.split(/\s+/)) {
    const dash = hash.indexOf("-")
    if (dash < 0) continue
    const algorithm = hash.slice(0, dash)
    const hex = Buffer.from(hash.slice(dash + 1), "base64").toString("hex")
    const file = Path.join(cache, "_cacache", "content-v2", algorithm, hex.slice(0, 2), hex.slice(2, 4), hex.slice(4))
    if (Fs.existsSync(file)) return file
  }
  return undefined
}

const compareVersions = (a: string, b: string): number => {
  const parse = (v: string) => v.split(/[.+-]/).map((part) => (/^\d+$/.test(part) ? Number(part) : part))
  const [pa, pb] = [parse(a), parse(b)]
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const [x, y] = [pa[i], pb[i]]
    if (x === y) continue
    if (x === undefined) return -1
    if (y === undefined) return 1
    if (typeof x === "number" && typeof y === "number") return x - y
    return String(x) < String(y) ? -1 : 1
  }
  return 0
}

export interface Registry {
  readonly url: string
  /** Packument and tarball requests served, and the ones refused (404). */
  readonly served: ReadonlyArray<string>
  readonly missing: ReadonlyArray<string>
  readonly close: () => Promise<void>
}

/**
 * Starts the registry on 127.0.0.1 (port 0). `lockFile`: the repository's lock; `cache`: the npm
 * cache directory (`npm config get cache`); `tarballs`: packed packages (`.tgz` files).
 */
export const start = async (options: {
  readonly lockFile: string
  readonly cache: string
  readonly tarballs: ReadonlyArray<{ readonly file: string; readonly manifest: { readonly [field: string]: unknown } }>
}): Promise<Registry> => {
  const packages = new Map<string, Map<string, Version>>()
  const add = (name: string, version: string, entry: Version) => {
    const versions = packages.get(name) ?? new Map<string, Version>()
    versions.set(version, entry)
    packages.set(name, versions)
  }
  const lock = JSON.parse(Fs.readFileSync(options.lockFile, "utf8")) as {
    readonly packages: { readonly [path: string]: { readonly [field: string]: unknown } }
  }
  for (const [path, entry] of Object.entries(lock.packages)) {
    const at = path.lastIndexOf("node_modules/")
    if (at < 0 || entry["link"] === true) continue
    const name = typeof entry["name"] === "string" ? entry["name"] : path.slice(at + "node_modules/".length)
    const version = entry["version"]
    const integrity = entry["integrity"]
    if (typeof version !== "string" || typeof integrity !== "string") continue
    // Packages of other platforms are in the lock but were never downloaded here: npm skips them.
    const file = cachedFile(options.cache, integrity)
    const manifest: { [field: string]: unknown } = { name, version }
    for (const field of manifestFields) if (entry[field] !== undefined) manifest[field] = entry[field]
    add(name, version, { manifest, integrity, file: file ?? "" })
  }
  for (const tarball of options.tarballs) {
    const content = Fs.readFileSync(tarball.file)
    const integrity = `sha512-${Crypto.createHash("sha512").update(content).digest("base64")}`
    const { name, version } = tarball.manifest as { readonly name: string; readonly version: string }
    const manifest: { [field: string]: unknown } = { name, version }
    for (const field of manifestFields) {
      if (tarball.manifest[field] !== undefined) manifest[field] = tarball.manifest[field]
    }
    add(name, version, { manifest, integrity, file: tarball.file })
  }

  const served: Array<string> = []
  const missing: Array<string> = []
  let base = ""
  const tarballPath = (name: string, version: string) => `/${name}/-/${name.split("/").pop()}-${version}.tgz`
  const server = Http.createServer((req, res) => {
    const path = decodeURIComponent((req.url ?? "/").split("?")[0]!)
    const notFound = () => {
      missing.push(path)
      res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ error: "Not found" }))
    }
    const tarball = /^\/(.+)\/-\/([^/]+)\.tgz$/.exec(path)
    if (tarball !== null) {
      const name = tarball[1]!
      const version = packages.get(name)?.get(tarball[2]!.slice(name.split("/").pop()!.length + 1))
      if (version === undefined || version.file === "") return notFound()
      served.push(path)
      res.writeHead(200, { "content-type": "application/octet-stream" })
      Fs.createReadStream(version.file).pipe(res)
      return
    }
    const versions = packages.get(path.slice(1))
    if (versions === undefined) return notFound()
    served.push(path)
    const sorted = [...versions.keys()].sort(compareVersions)
    const stable = sorted.filter((v) => !v.includes("-"))
    const packument = {
      name: path.slice(1),
      "dist-tags": { latest: stable[stable.length - 1] ?? sorted[sorted.length - 1] },
      versions: Object.fromEntries(
        [...versions].map(([version, entry]) => [version, {
          ...entry.manifest,
          dist: { tarball: `${base}${tarballPath(path.slice(1), version)}`, integrity: entry.integrity }
        }])
      )
    }
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(packument))
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return {
    url: `${base}/`,
    served,
    missing,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
}
