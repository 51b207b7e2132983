import * as Fs from "node:fs"
import * as Path from "node:path"
import { defineConfig } from "vitepress"

const root = Path.resolve(import.meta.dirname, "..")
// Written by TypeDoc (`npm run docs` runs it first): one entry per public module.
const apiSidebar = JSON.parse(Fs.readFileSync(Path.join(root, "api/typedoc-sidebar.json"), "utf8"))

export default defineConfig({
  title: "Tether",
  description: "Run coding-agent CLIs from an Effect backend through one typed API.",
  outDir: "../build/docs",
  cacheDir: "../build/docs-cache",
  srcExclude: ["README.md"],
  themeConfig: {
    nav: [{ text: "Guides", link: "/getting-started" }, { text: "API", link: "/api/" }],
    sidebar: {
      "/api/": [{ text: "API reference", link: "/api/", items: apiSidebar }],
      "/": [{ text: "Guides", items: [{ text: "Getting started", link: "/getting-started" }] }]
    },
    search: { provider: "local" }
  }
})
