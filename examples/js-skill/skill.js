// js-text: reverse text and summarise numbers, a skillhost skill written in JavaScript.
//
// `skillhost build examples/js-skill` turns this module into a component of the
// `skillhost:skill` world with componentize-js. `guest` implements the world's `guest`
// interface; the `host` import gives log and progress.

import { log } from "skillhost:skill/host@0.1.0";

const READ_ONLY = { readOnly: true, destructive: false, idempotent: true, openWorld: false };

/** A `call-error` of the world: throw it to fail a call. */
class CallError {
  constructor(tag, val) {
    this.tag = tag;
    this.val = val;
  }
}

const invalid = (message) => new CallError("invalid-input", message);

const TOOLS = {
  reverse: {
    description: "Reverse a text by characters (Unicode code points) or by word order.",
    inputSchema: {
      type: "object",
      properties: {
        text: { type: "string", description: "The text to reverse." },
        by: { type: "string", enum: ["chars", "words"], default: "chars" },
      },
      required: ["text"],
    },
    outputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
    examples: [{ text: "hello world", by: "words" }],
    run({ text, by = "chars" }) {
      if (typeof text !== "string") throw invalid("`text` must be a string");
      if (by === "chars") return { text: Array.from(text).reverse().join("") };
      if (by === "words") return { text: text.split(/\s+/).filter(Boolean).reverse().join(" ") };
      throw invalid("`by` must be `chars` or `words`");
    },
  },
  stats: {
    description: "Count, sum, mean, minimum and maximum of a list of numbers.",
    inputSchema: {
      type: "object",
      properties: { numbers: { type: "array", items: { type: "number" }, minItems: 1 } },
      required: ["numbers"],
    },
    outputSchema: {
      type: "object",
      properties: {
        count: { type: "integer" },
        sum: { type: "number" },
        mean: { type: "number" },
        min: { type: "number" },
        max: { type: "number" },
      },
      required: ["count", "sum", "mean", "min", "max"],
    },
    examples: [{ numbers: [3, 1, 2] }],
    run({ numbers }) {
      if (!Array.isArray(numbers) || numbers.length === 0 || !numbers.every(Number.isFinite)) {
        throw invalid("`numbers` must be a non-empty list of numbers");
      }
      const sum = numbers.reduce((a, b) => a + b, 0);
      log("debug", `summarising ${numbers.length} numbers`);
      return { count: numbers.length, sum, mean: sum / numbers.length, min: Math.min(...numbers), max: Math.max(...numbers) };
    },
  },
};

export const guest = {
  tools() {
    return Object.entries(TOOLS).map(([name, tool]) => ({
      name,
      description: tool.description,
      inputSchema: JSON.stringify(tool.inputSchema),
      outputSchema: JSON.stringify(tool.outputSchema),
      annotations: READ_ONLY,
      examples: tool.examples.map((e) => JSON.stringify(e)),
    }));
  },

  call(name, input) {
    const tool = TOOLS[name];
    if (!tool) throw new CallError("unknown-tool", name);
    try {
      const args = JSON.parse(input);
      if (typeof args !== "object" || args === null || Array.isArray(args)) throw invalid("the input must be a JSON object");
      return JSON.stringify(tool.run(args));
    } catch (e) {
      // Anything else thrown would abort the instance: report it as a failure.
      if (e instanceof CallError) throw e;
      throw new CallError(e instanceof SyntaxError ? "invalid-input" : "failed", String(e));
    }
  },
};
