package dev.contextengine.conformance;

import com.google.gson.Gson;
import com.google.gson.GsonBuilder;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The conformance matcher, variables and captures: the same rules as the Python reference runner
 * (clients/conformance/python_runner.py) and the TypeScript one, documented in
 * clients/conformance/README.md. Values are plain Java: Map, List, String, Number, Boolean, null.
 */
public final class Match {
  private Match() {}

  /** A step did not do what the scenario expects. */
  public static final class StepFailure extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public StepFailure(String message) {
      super(message);
    }
  }

  /** A scenario file is malformed (reported as a failure too). */
  public static final class ScenarioError extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public ScenarioError(String message) {
      super(message);
    }
  }

  /** A key absent from the actual value. */
  public static final Object MISSING =
      new Object() {
        @Override
        public String toString() {
          return "<absent>";
        }
      };

  static final Gson GSON = new GsonBuilder().disableHtmlEscaping().serializeNulls().create();
  private static final Pattern VAR = Pattern.compile("\\$\\{([A-Za-z_][A-Za-z0-9_]*)\\}");
  private static final Pattern WHOLE_VAR = Pattern.compile("^\\$\\{([A-Za-z_][A-Za-z0-9_]*)\\}$");
  private static final Pattern NUMERIC = Pattern.compile("^-?\\d+(\\.\\d+)?([eE][-+]?\\d+)?$");
  private static final Pattern INDEX = Pattern.compile("^-?\\d+$");

  static boolean isObject(Object value) {
    return value instanceof Map;
  }

  @SuppressWarnings("unchecked")
  static Map<String, Object> asMap(Object value) {
    return (Map<String, Object>) value;
  }

  @SuppressWarnings("unchecked")
  static List<Object> asList(Object value) {
    return (List<Object>) value;
  }

  static boolean isDefault(Object value) {
    if (value == MISSING || value == null || "".equals(value) || Boolean.FALSE.equals(value)) {
      return true;
    }
    if (value instanceof Number) {
      return ((Number) value).doubleValue() == 0;
    }
    if (value instanceof List) {
      return asList(value).isEmpty();
    }
    return value instanceof Map && asMap(value).isEmpty();
  }

  static Double asNumber(Object value) {
    if (value instanceof Number) {
      return ((Number) value).doubleValue();
    }
    if (value instanceof String && NUMERIC.matcher((String) value).matches()) {
      return Double.valueOf((String) value);
    }
    return null;
  }

  /** The value as JSON text (absent as {@code <absent>}). */
  public static String show(Object value) {
    return value == MISSING ? "<absent>" : GSON.toJson(value);
  }

  private static StepFailure fail(String path, String text) {
    return new StepFailure(path + ": " + text);
  }

  /** Throws StepFailure unless {@code actual} (proto JSON) matches {@code expected}. */
  public static void match(Object expected, Object actual, String path) {
    if (expected instanceof String
        && ((String) expected).startsWith("$")
        && !((String) expected).startsWith("${")) {
      matchToken((String) expected, actual, path);
      return;
    }
    if (isObject(expected)) {
      Map<String, Object> exp = asMap(expected);
      if (exp.size() == 1) {
        String key = exp.keySet().iterator().next();
        if (key.startsWith("$")) {
          matchOperator(key, exp.get(key), actual, path);
          return;
        }
      }
      Object object = actual == MISSING || actual == null ? Map.of() : actual;
      if (!isObject(object)) {
        throw fail(path, "expected an object, got " + show(actual));
      }
      Map<String, Object> act = asMap(object);
      for (Map.Entry<String, Object> entry : exp.entrySet()) {
        String k = entry.getKey();
        match(entry.getValue(), act.containsKey(k) ? act.get(k) : MISSING, path + "." + k);
      }
      return;
    }
    if (expected instanceof List) {
      List<Object> exp = asList(expected);
      Object list = actual == MISSING || actual == null ? List.of() : actual;
      if (!(list instanceof List)) {
        throw fail(path, "expected a list, got " + show(actual));
      }
      List<Object> act = asList(list);
      if (act.size() != exp.size()) {
        throw fail(
            path, "expected " + exp.size() + " item(s), got " + act.size() + ": " + show(actual));
      }
      for (int i = 0; i < exp.size(); i++) {
        match(exp.get(i), act.get(i), path + "[" + i + "]");
      }
      return;
    }
    if (expected == null) {
      if (actual != MISSING && actual != null) {
        throw fail(path, "expected null or absent, got " + show(actual));
      }
      return;
    }
    if (actual == MISSING) {
      if (isDefault(expected)) {
        return;
      }
      throw fail(path, "expected " + show(expected) + ", got <absent>");
    }
    if (expected instanceof Boolean || actual instanceof Boolean) {
      if (!expected.equals(actual)) {
        throw fail(path, "expected " + show(expected) + ", got " + show(actual));
      }
      return;
    }
    Double expNum = asNumber(expected);
    Double actNum = asNumber(actual);
    if (expNum != null
        && actNum != null
        && (!(expected instanceof String) || !(actual instanceof String))) {
      if (expNum.doubleValue() != actNum.doubleValue()) {
        throw fail(path, "expected " + show(expected) + ", got " + show(actual));
      }
      return;
    }
    if (!expected.equals(actual)) {
      throw fail(path, "expected " + show(expected) + ", got " + show(actual));
    }
  }

  private static void matchToken(String token, Object actual, String path) {
    switch (token) {
      case "$any":
        return;
      case "$absent":
        if (!isDefault(actual)) {
          throw fail(path, "expected absent, got " + show(actual));
        }
        return;
      case "$present":
        if (isDefault(actual)) {
          throw fail(path, "expected a non-default value, got " + show(actual));
        }
        return;
      default:
        throw new ScenarioError(path + ": unknown matcher " + show(token));
    }
  }

  private static Object listOf(Object actual) {
    return actual == MISSING || actual == null ? List.of() : actual;
  }

  private static void matchOperator(String op, Object arg, Object actual, String path) {
    switch (op) {
      case "$exact":
        {
          if (isObject(arg)) {
            Object present = actual == MISSING || actual == null ? Map.of() : actual;
            if (!isObject(present)) {
              throw fail(path, "expected an object, got " + show(actual));
            }
            List<String> extra = new ArrayList<>();
            for (Map.Entry<String, Object> entry : asMap(present).entrySet()) {
              if (!asMap(arg).containsKey(entry.getKey()) && !isDefault(entry.getValue())) {
                extra.add(entry.getKey());
              }
            }
            extra.sort(null);
            if (!extra.isEmpty()) {
              throw fail(path, "unexpected key(s) " + show(extra) + " in " + show(actual));
            }
          }
          match(arg, actual, path);
          return;
        }
      case "$len":
        {
          Object items = listOf(actual);
          int length;
          if (items instanceof List) {
            length = asList(items).size();
          } else if (items instanceof String) {
            length = ((String) items).length();
          } else if (isObject(items)) {
            length = asMap(items).size();
          } else {
            throw fail(path, "expected something with a length, got " + show(actual));
          }
          Double want = asNumber(arg);
          if (want == null || want.doubleValue() != length) {
            throw fail(
                path, "expected length " + show(arg) + ", got " + length + ": " + show(actual));
          }
          return;
        }
      case "$contains":
        {
          if (actual instanceof String && arg instanceof String) {
            if (!((String) actual).contains((String) arg)) {
              throw fail(path, show(actual) + " does not contain " + show(arg));
            }
            return;
          }
          Object items = listOf(actual);
          if (!(items instanceof List)) {
            throw fail(path, "expected a list or a string, got " + show(actual));
          }
          for (Object item : asList(items)) {
            try {
              match(arg, item, path);
              return;
            } catch (StepFailure ignored) {
              // try the next item
            }
          }
          throw fail(path, "no item matches " + show(arg) + " in " + show(actual));
        }
      case "$startsWith":
        if (!(actual instanceof String)
            || !(arg instanceof String)
            || !((String) actual).startsWith((String) arg)) {
          throw fail(
              path, "expected a string starting with " + show(arg) + ", got " + show(actual));
        }
        return;
      case "$gt":
      case "$gte":
      case "$lt":
      case "$lte":
        {
          Double value = asNumber(actual == MISSING ? Integer.valueOf(0) : actual);
          Double bound = asNumber(arg);
          if (value == null || bound == null) {
            throw fail(path, "expected a number, got " + show(actual));
          }
          double v = value;
          double b = bound;
          boolean ok =
              op.equals("$gt")
                  ? v > b
                  : op.equals("$gte") ? v >= b : op.equals("$lt") ? v < b : v <= b;
          if (!ok) {
            throw fail(
                path, "expected " + op.substring(1) + " " + show(arg) + ", got " + show(actual));
          }
          return;
        }
      case "$each":
        {
          Object items = listOf(actual);
          if (!(items instanceof List)) {
            throw fail(path, "expected a list, got " + show(actual));
          }
          List<Object> list = asList(items);
          for (int i = 0; i < list.size(); i++) {
            match(arg, list.get(i), path + "[" + i + "]");
          }
          return;
        }
      case "$prefix":
        {
          Object items = listOf(actual);
          if (!(items instanceof List)
              || !(arg instanceof List)
              || asList(items).size() < asList(arg).size()) {
            throw fail(
                path, "expected a list starting with " + show(arg) + ", got " + show(actual));
          }
          List<Object> want = asList(arg);
          for (int i = 0; i < want.size(); i++) {
            match(want.get(i), asList(items).get(i), path + "[" + i + "]");
          }
          return;
        }
      case "$not":
        {
          try {
            match(arg, actual, path);
          } catch (StepFailure expected) {
            return;
          }
          throw fail(path, "expected not " + show(arg) + ", got " + show(actual));
        }
      default:
        throw new ScenarioError(path + ": unknown operator " + show(op));
    }
  }

  /** The value at a dot path ({@code session.events.0.id}; {@code -1} is the last item). */
  public static Object lookup(Object data, String path) {
    Object value = data;
    for (String part : path.split("\\.", -1)) {
      if (value instanceof List && INDEX.matcher(part).matches()) {
        List<Object> list = asList(value);
        int index = Integer.parseInt(part);
        if (index >= -list.size() && index < list.size()) {
          value = list.get(index < 0 ? list.size() + index : index);
          continue;
        }
        throw new StepFailure("capture " + show(path) + ": index " + part + " out of range");
      }
      if (isObject(value) && asMap(value).containsKey(part)) {
        value = asMap(value).get(part);
        continue;
      }
      throw new StepFailure(
          "capture " + show(path) + ": " + show(part) + " not found in " + show(value));
    }
    return value;
  }

  /** Replaces {@code ${name}} in every string (a whole-string reference keeps the type). */
  public static Object substitute(Object value, Map<String, Object> variables) {
    if (value instanceof String) {
      String text = (String) value;
      Matcher whole = WHOLE_VAR.matcher(text);
      if (whole.matches()) {
        return variable(whole.group(1), variables);
      }
      Matcher m = VAR.matcher(text);
      StringBuilder out = new StringBuilder();
      while (m.find()) {
        Object v = variable(m.group(1), variables);
        m.appendReplacement(
            out, Matcher.quoteReplacement(v instanceof String ? (String) v : GSON.toJson(v)));
      }
      m.appendTail(out);
      return out.toString();
    }
    if (value instanceof List) {
      List<Object> out = new ArrayList<>();
      for (Object item : asList(value)) {
        out.add(substitute(item, variables));
      }
      return out;
    }
    if (isObject(value)) {
      Map<String, Object> out = new LinkedHashMap<>();
      for (Map.Entry<String, Object> entry : asMap(value).entrySet()) {
        out.put(
            (String) substitute(entry.getKey(), variables),
            substitute(entry.getValue(), variables));
      }
      return out;
    }
    return value;
  }

  private static Object variable(String name, Map<String, Object> variables) {
    if (!variables.containsKey(name)) {
      throw new ScenarioError("unknown variable ${" + name + "}");
    }
    return variables.get(name);
  }
}
