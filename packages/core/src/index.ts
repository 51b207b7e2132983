export * as Driver from "./Driver.js"
export * as Event from "./Event.js"
export * as ThreadStore from "./ThreadStore.js"
