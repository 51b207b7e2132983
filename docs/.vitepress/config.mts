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
      "/": [
        {
          text: "Guides",
          items: [
            { text: "Getting started", link: "/getting-started" },
            { text: "Concepts", link: "/concepts" },
            { text: "Tools", link: "/tools" },
            { text: "Approvals and built-in tools", link: "/approvals" },
            { text: "Instructions, skills and MCP", link: "/skills-and-mcp" },
            { text: "Threads and stores", link: "/threads" },
            { text: "Structured output", link: "/structured-output" },
            { text: "Profiles", link: "/profiles" },
            { text: "Security model", link: "/security" },
            { text: "Drivers", link: "/drivers" },
            { text: "Testing your agent", link: "/testing" },
            { text: "Writing a driver", link: "/writing-a-driver" },
            { text: "Effect apps and other hosts", link: "/effect-apps-and-other-hosts" },
            { text: "Serving over HTTP", link: "/http" },
            { text: "Deployment", link: "/fleets" },
            { text: "Tracing", link: "/tracing" },
            { text: "With @effect/ai", link: "/ai" },
            { text: "Working on Tether", link: "/contributing" }
          ]
        },
        { text: "API reference", link: "/api/" }
      ]
    },
    search: { provider: "local" }
  }
})
