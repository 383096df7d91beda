/**
 * The conformance matcher, variables and captures: the same rules as the Python reference
 * runner (clients/conformance/python_runner.py), documented in clients/conformance/README.md.
 */

/** A step did not do what the scenario expects. */
export class StepFailure extends Error {
  override readonly name = "StepFailure";
}

/** A scenario file is malformed (reported as a failure too). */
export class ScenarioError extends Error {
  override readonly name = "ScenarioError";
}

/** A key absent from the actual value. */
export const MISSING: unique symbol = Symbol("missing");
type Actual = unknown;

const VAR = /\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g;
const WHOLE_VAR = /^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$/;
const NUMERIC = /^-?\d+(\.\d+)?([eE][-+]?\d+)?$/;

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isDefault(value: Actual): boolean {
  if (value === MISSING || value === null || value === "" || value === 0 || value === false) {
    return true;
  }
  if (Array.isArray(value)) {
    return value.length === 0;
  }
  return isObject(value) && Object.keys(value).length === 0;
}

function asNumber(value: unknown): number | undefined {
  if (typeof value === "number") {
    return value;
  }
  if (typeof value === "string" && NUMERIC.test(value)) {
    return Number(value);
  }
  return undefined;
}

export function show(value: Actual): string {
  return value === MISSING ? "<absent>" : JSON.stringify(value);
}

/** Throws StepFailure unless `actual` (proto JSON) matches `expected`. */
export function match(expected: unknown, actual: Actual, path = "$"): void {
  if (typeof expected === "string" && expected.startsWith("$") && !expected.startsWith("${")) {
    matchToken(expected, actual, path);
    return;
  }
  if (isObject(expected)) {
    const keys = Object.keys(expected);
    const [key] = keys;
    if (keys.length === 1 && key !== undefined && key.startsWith("$")) {
      matchOperator(key, expected[key], actual, path);
      return;
    }
    const object = actual === MISSING || actual === null ? {} : actual;
    if (!isObject(object)) {
      throw new StepFailure(`${path}: expected an object, got ${show(actual)}`);
    }
    for (const [k, v] of Object.entries(expected)) {
      match(v, k in object ? object[k] : MISSING, `${path}.${k}`);
    }
    return;
  }
  if (Array.isArray(expected)) {
    const list = actual === MISSING || actual === null ? [] : actual;
    if (!Array.isArray(list)) {
      throw new StepFailure(`${path}: expected a list, got ${show(actual)}`);
    }
    if (list.length !== expected.length) {
      throw new StepFailure(
        `${path}: expected ${expected.length} item(s), got ${list.length}: ${show(actual)}`,
      );
    }
    expected.forEach((exp, i) => {
      match(exp, list[i], `${path}[${i}]`);
    });
    return;
  }
  if (expected === null) {
    if (actual !== MISSING && actual !== null) {
      throw new StepFailure(`${path}: expected null or absent, got ${show(actual)}`);
    }
    return;
  }
  if (actual === MISSING) {
    if (isDefault(expected)) {
      return;
    }
    throw new StepFailure(`${path}: expected ${show(expected)}, got <absent>`);
  }
  if (typeof expected === "boolean" || typeof actual === "boolean") {
    if (expected !== actual) {
      throw new StepFailure(`${path}: expected ${show(expected)}, got ${show(actual)}`);
    }
    return;
  }
  const expNum = asNumber(expected);
  const actNum = asNumber(actual);
  if (
    expNum !== undefined &&
    actNum !== undefined &&
    (typeof expected !== "string" || typeof actual !== "string")
  ) {
    if (expNum !== actNum) {
      throw new StepFailure(`${path}: expected ${show(expected)}, got ${show(actual)}`);
    }
    return;
  }
  if (expected !== actual) {
    throw new StepFailure(`${path}: expected ${show(expected)}, got ${show(actual)}`);
  }
}

function matchToken(token: string, actual: Actual, path: string): void {
  switch (token) {
    case "$any":
      return;
    case "$absent":
      if (!isDefault(actual)) {
        throw new StepFailure(`${path}: expected absent, got ${show(actual)}`);
      }
      return;
    case "$present":
      if (isDefault(actual)) {
        throw new StepFailure(`${path}: expected a non-default value, got ${show(actual)}`);
      }
      return;
    default:
      throw new ScenarioError(`${path}: unknown matcher ${JSON.stringify(token)}`);
  }
}

function listOf(actual: Actual): unknown {
  return actual === MISSING || actual === null ? [] : actual;
}

function matchOperator(op: string, arg: unknown, actual: Actual, path: string): void {
  switch (op) {
    case "$exact": {
      if (isObject(arg)) {
        const present = actual === MISSING || actual === null ? {} : actual;
        if (!isObject(present)) {
          throw new StepFailure(`${path}: expected an object, got ${show(actual)}`);
        }
        const extra = Object.entries(present)
          .filter(([k, v]) => !(k in arg) && !isDefault(v))
          .map(([k]) => k)
          .sort();
        if (extra.length > 0) {
          throw new StepFailure(`${path}: unexpected key(s) ${show(extra)} in ${show(actual)}`);
        }
      }
      match(arg, actual, path);
      return;
    }
    case "$len": {
      const items = listOf(actual);
      let length: number;
      if (Array.isArray(items) || typeof items === "string") {
        length = items.length;
      } else if (isObject(items)) {
        length = Object.keys(items).length;
      } else {
        throw new StepFailure(`${path}: expected something with a length, got ${show(actual)}`);
      }
      if (length !== arg) {
        throw new StepFailure(`${path}: expected length ${arg}, got ${length}: ${show(actual)}`);
      }
      return;
    }
    case "$contains": {
      if (typeof actual === "string" && typeof arg === "string") {
        if (!actual.includes(arg)) {
          throw new StepFailure(`${path}: ${show(actual)} does not contain ${show(arg)}`);
        }
        return;
      }
      const items = listOf(actual);
      if (!Array.isArray(items)) {
        throw new StepFailure(`${path}: expected a list or a string, got ${show(actual)}`);
      }
      for (const item of items) {
        try {
          match(arg, item, path);
          return;
        } catch (err) {
          if (!(err instanceof StepFailure)) {
            throw err;
          }
        }
      }
      throw new StepFailure(`${path}: no item matches ${show(arg)} in ${show(actual)}`);
    }
    case "$startsWith":
      if (typeof actual !== "string" || typeof arg !== "string" || !actual.startsWith(arg)) {
        throw new StepFailure(
          `${path}: expected a string starting with ${show(arg)}, got ${show(actual)}`,
        );
      }
      return;
    case "$gt":
    case "$gte":
    case "$lt":
    case "$lte": {
      const value = asNumber(actual === MISSING ? 0 : actual);
      const bound = asNumber(arg);
      if (value === undefined || bound === undefined) {
        throw new StepFailure(`${path}: expected a number, got ${show(actual)}`);
      }
      const ok =
        op === "$gt"
          ? value > bound
          : op === "$gte"
            ? value >= bound
            : op === "$lt"
              ? value < bound
              : value <= bound;
      if (!ok) {
        throw new StepFailure(`${path}: expected ${op.slice(1)} ${arg}, got ${show(actual)}`);
      }
      return;
    }
    case "$each": {
      const items = listOf(actual);
      if (!Array.isArray(items)) {
        throw new StepFailure(`${path}: expected a list, got ${show(actual)}`);
      }
      items.forEach((item, i) => {
        match(arg, item, `${path}[${i}]`);
      });
      return;
    }
    case "$prefix": {
      const items = listOf(actual);
      if (!Array.isArray(items) || !Array.isArray(arg) || items.length < arg.length) {
        throw new StepFailure(
          `${path}: expected a list starting with ${show(arg)}, got ${show(actual)}`,
        );
      }
      arg.forEach((exp, i) => {
        match(exp, items[i], `${path}[${i}]`);
      });
      return;
    }
    case "$not": {
      try {
        match(arg, actual, path);
      } catch (err) {
        if (err instanceof StepFailure) {
          return;
        }
        throw err;
      }
      throw new StepFailure(`${path}: expected not ${show(arg)}, got ${show(actual)}`);
    }
    default:
      throw new ScenarioError(`${path}: unknown operator ${JSON.stringify(op)}`);
  }
}

/** The value at a dot path (`session.events.0.id`; `-1` is the last item). */
export function lookup(data: unknown, path: string): unknown {
  let value = data;
  for (const part of path.split(".")) {
    if (Array.isArray(value) && /^-?\d+$/.test(part)) {
      const index = Number(part);
      if (index >= -value.length && index < value.length) {
        value = value[index < 0 ? value.length + index : index];
        continue;
      }
      throw new StepFailure(`capture ${JSON.stringify(path)}: index ${part} out of range`);
    }
    if (isObject(value) && part in value) {
      value = value[part];
      continue;
    }
    throw new StepFailure(
      `capture ${JSON.stringify(path)}: ${JSON.stringify(part)} not found in ${show(value)}`,
    );
  }
  return value;
}

/** Replaces `${name}` in every string (a whole-string reference keeps the variable's type). */
export function substitute(value: unknown, variables: Readonly<Record<string, unknown>>): unknown {
  if (typeof value === "string") {
    const whole = WHOLE_VAR.exec(value);
    if (whole?.[1] !== undefined) {
      return variable(whole[1], variables);
    }
    return value.replace(VAR, (_m, name: string) => text(variable(name, variables)));
  }
  if (Array.isArray(value)) {
    return value.map((v) => substitute(v, variables));
  }
  if (isObject(value)) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      out[substitute(k, variables) as string] = substitute(v, variables);
    }
    return out;
  }
  return value;
}

function variable(name: string, variables: Readonly<Record<string, unknown>>): unknown {
  if (!(name in variables)) {
    throw new ScenarioError(`unknown variable \${${name}}`);
  }
  return variables[name];
}

function text(value: unknown): string {
  return typeof value === "string" ? value : JSON.stringify(value);
}
