export * as ProfileLayout from "./ProfileLayout.js"
