export * as Catalog from "./Catalog.js"
export * as Tool from "./Tool.js"
export * as Toolkit from "./Toolkit.js"
