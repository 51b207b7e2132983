export * as Catalog from "./Catalog.js"
