/**
 * @internal
 */
import { pipeArguments } from "effect/Pipeable"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import type * as Catalog from "../Catalog.js"

/** @internal */
export const TypeId: unique symbol = Symbol.for("@tether/tool/Tool")

/** @internal */
export type TypeId = typeof TypeId

/** The brand of a tool's handler service (`Tool.HandlerService`); a type-level key only. @internal */
export const HandlerTypeId: unique symbol = Symbol.for("@tether/tool/Tool/Handler")

/** @internal */
export type HandlerTypeId = typeof HandlerTypeId

/** @internal */
export interface AnnotationsInput {
  readonly readOnly?: boolean
  readonly destructive?: boolean
  readonly idempotent?: boolean
  readonly openWorld?: boolean
}

/** @internal */
export interface ToolData {
  readonly name: string
  readonly description: string
  readonly title: string | undefined
  readonly revision: string | undefined
  readonly annotations: AnnotationsInput
  readonly inputSchema: Schema.Schema.AnyNoContext
  readonly outputSchema: Schema.Schema.AnyNoContext
  readonly failureSchema: Schema.Schema.AnyNoContext
  readonly inputSchemaJson: Catalog.JsonSchema | undefined
  readonly outputSchemaJson: Catalog.JsonSchema | undefined
}

const Proto = {
  [TypeId]: TypeId,
  pipe() {
    return pipeArguments(this, arguments)
  },
  toJSON(this: ToolData) {
    return { _id: "@tether/tool/Tool", name: this.name }
  }
}

/** @internal */
export const isTool = (u: unknown): u is ToolData => Predicate.hasProperty(u, TypeId)

/** @internal */
export interface MakeOptions {
  readonly description: string
  readonly input: Schema.Struct.Fields | Schema.Schema.AnyNoContext
  readonly output: Schema.Schema.AnyNoContext
  readonly failure?: Schema.Schema.AnyNoContext | undefined
  readonly title?: string | undefined
  readonly revision?: string | undefined
  readonly annotations?: AnnotationsInput | undefined
  readonly inputSchemaJson?: Catalog.JsonSchema | undefined
  readonly outputSchemaJson?: Catalog.JsonSchema | undefined
}

const annotationKeys = ["readOnly", "destructive", "idempotent", "openWorld"] as const

/** @internal */
export const make = (name: string, options: MakeOptions): ToolData => {
  // Only explicitly given hints are kept, so `false` stays distinct from "unspecified".
  const annotations: { -readonly [K in keyof AnnotationsInput]: boolean } = {}
  for (const key of annotationKeys) {
    const value = options.annotations?.[key]
    if (value !== undefined) annotations[key] = value
  }
  const data: ToolData = {
    name,
    description: options.description,
    title: options.title,
    revision: options.revision,
    annotations: Object.freeze(annotations),
    inputSchema: Schema.isSchema(options.input)
      ? options.input as Schema.Schema.AnyNoContext
      : Schema.Struct(options.input as Schema.Struct.Fields) as unknown as Schema.Schema.AnyNoContext,
    outputSchema: options.output,
    failureSchema: options.failure ?? Schema.Unknown,
    inputSchemaJson: options.inputSchemaJson,
    outputSchemaJson: options.outputSchemaJson
  }
  return Object.freeze(Object.assign(Object.create(Proto), data))
}
