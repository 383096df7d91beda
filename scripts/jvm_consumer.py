"""Builds an outside project from a JVM client's guide and fetches a context with it.

``python scripts/jvm_consumer.py java|kotlin|java-adk``, with ``CONTEXTENGINE_TARGET`` set to a
running sidecar (``scripts/with_server.py`` sets it; ``make test-jvm-consumers``). In a fresh
temporary directory it writes the ``pom.xml`` that the guide shows (its first ```xml block that
is a whole ``<project>``), a main made of the guide's first code block (its example file's
imports around it) and builds it with Maven against the jars installed in the local repository
(``make java-build``, ``kotlin-build``, ``java-adk-build`` install them; the local repository is
Maven's own setting, e.g. ``MAVEN_ARGS=-Dmaven.repo.local=...``). Offline first: when something
is missing from the local repository it builds again online. Then it runs the main with plain
``java`` and checks what it printed (and that one grpc-java version is on the class path). The
last line is ``N passed, N failed``.

The ADK Java guide's block needs what an agent brings: the main gives it a ``target``, a ``root``
agent on a scripted model (no network, no key: ADK_MODEL, the smallest form of the drop-in's own
``PluginTest.Scripted``) and, after the block, prints what the sidecar stored for the session the
block created and what the model was asked.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MVNW = REPO / "clients" / "java" / "mvnw"
RUN_TIMEOUT_S = 180.0


@dataclass(frozen=True)
class Consumer:
    guide: str
    language: str
    example: str
    source: str
    main_class: str
    expected: tuple[str, ...]
    # Java only: imports beyond the example's, members of the main's class, code before and
    # after the block in the main.
    extra_imports: tuple[str, ...] = ()
    members: str = ""
    before: str = ""
    after: str = ""


# A model for the ADK Java consumer: answers every call with one text and keeps the text of the
# last content it was asked with (the plugin's context from the engine).
ADK_MODEL = """
  /** A model without a network: one scripted answer; keeps what it was asked last. */
  static final class Scripted extends BaseLlm {
    final List<String> asked = new ArrayList<>();

    Scripted() {
      super("scripted");
    }

    @Override
    public Flowable<LlmResponse> generateContent(LlmRequest request, boolean stream) {
      List<Content> contents = request.contents();
      asked.add(contents.get(contents.size() - 1).parts().orElseThrow().get(0).text().orElse(""));
      Content answer = Content.builder().role("model").parts(List.of(Part.fromText("Sunny."))).build();
      return Flowable.just(LlmResponse.builder().content(answer).build());
    }

    @Override
    public BaseLlmConnection connect(LlmRequest request) {
      throw new UnsupportedOperationException();
    }
  }

  /** The ids of zoe's sessions of the guide's app. */
  static Set<String> sessionsOfZoe(String target) {
    try (ContextEngineClient client = ContextEngineClient.connect(target)) {
      Set<String> ids = new TreeSet<>();
      for (Session s : new ContextEngineSessionService(client).listSessions("travel", "zoe")
          .blockingGet().sessions()) {
        ids.add(s.id());
      }
      return ids;
    }
  }
"""

ADK_BEFORE = """\
String target = System.getenv().getOrDefault("CONTEXTENGINE_TARGET", "127.0.0.1:50151");
Scripted model = new Scripted();
LlmAgent root = LlmAgent.builder().name("root").instruction("You plan trips.").model(model).build();
Set<String> before = sessionsOfZoe(target);
"""

ADK_AFTER = """\
Set<String> created = sessionsOfZoe(target);
created.removeAll(before);
try (ContextEngineClient client = ContextEngineClient.connect(target)) {
  for (String id : created) {
    Session stored =
        new ContextEngineSessionService(client)
            .getSession("travel", "zoe", id, Optional.empty())
            .blockingGet();
    List<String> authors = new ArrayList<>();
    stored.events().forEach(e -> authors.add(e.author()));
    System.out.println("stored: " + authors + " " + new TreeMap<>(stored.state()));
  }
}
System.out.println("asked: " + model.asked);
"""


CONSUMERS = {
    "java": Consumer(
        guide="clients/java/README.md",
        language="java",
        example="clients/java/examples/dev/contextengine/examples/ReadmeExample.java",
        source="src/main/java/Hello.java",
        main_class="Hello",
        expected=("1 1", "NOT_FOUND SESSION_NOT_FOUND"),
    ),
    "kotlin": Consumer(
        guide="clients/kotlin/README.md",
        language="kotlin",
        example="clients/kotlin/examples/ReadmeExample.kt",
        source="src/main/kotlin/Hello.kt",
        main_class="HelloKt",
        expected=("1 1", "NOT_FOUND SESSION_NOT_FOUND", "Again!"),
    ),
    "java-adk": Consumer(
        guide="clients/java-adk/README.md",
        language="java",
        example="clients/java-adk/examples/dev/contextengine/adk/examples/ReadmeExample.java",
        source="src/main/java/Hello.java",
        main_class="Hello",
        expected=(
            "Sunny.",
            "stored: [user, root] {user:home=Porto}",
            "asked: [Weather in Lisbon?]",
        ),
        extra_imports=(
            "import com.google.adk.models.BaseLlm;",
            "import com.google.adk.models.BaseLlmConnection;",
            "import com.google.adk.models.LlmRequest;",
            "import com.google.adk.models.LlmResponse;",
            "import io.reactivex.rxjava3.core.Flowable;",
            "import java.util.ArrayList;",
            "import java.util.List;",
            "import java.util.Optional;",
            "import java.util.Set;",
            "import java.util.TreeMap;",
            "import java.util.TreeSet;",
        ),
        members=ADK_MODEL,
        before=ADK_BEFORE,
        after=ADK_AFTER,
    ),
}


def blocks(text: str, language: str) -> list[str]:
    """The fenced blocks in ``language`` of a guide, as Guide.blocks reads them."""
    return re.findall(r"^```" + re.escape(language) + r"\n([\s\S]*?)^```", text, re.MULTILINE)


def consumer_pom(guide: str) -> str:
    for block in blocks(guide, "xml"):
        if block.lstrip().startswith("<project"):
            return block
    raise SystemExit("the guide shows no whole pom.xml (a ```xml block that is a <project>)")


def imports(example: Path) -> list[str]:
    return [
        line
        for line in example.read_text(encoding="utf-8").splitlines()
        if line.startswith("import ")
    ]


def indent(code: str, prefix: str) -> str:
    return "\n".join(prefix + line if line.strip() else "" for line in code.splitlines())


def main_source(consumer: Consumer, first_block: str) -> str:
    lines = "\n".join(dict.fromkeys([*imports(REPO / consumer.example), *consumer.extra_imports]))
    if consumer.language == "java":
        body = indent(
            "\n".join(filter(None, [consumer.before, first_block, consumer.after])), "    "
        )
        return (
            f"{lines}\n\npublic final class Hello {{\n"
            f"  public static void main(String[] args) throws Exception {{\n{body}\n  }}\n"
            f"{consumer.members}}}\n"
        )
    body = indent(first_block, "        ")
    return f"{lines}\n\nfun main() {{\n    runBlocking {{\n{body}\n    }}\n}}\n"


def maven(project: Path, offline: bool) -> subprocess.CompletedProcess[str]:
    command = [
        str(MVNW),
        "-B",
        "-q",
        "-f",
        str(project / "pom.xml"),
        *(["-o"] if offline else []),
        "package",
        "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:build-classpath",
        f"-Dmdep.outputFile={project / 'classpath.txt'}",
    ]
    return subprocess.run(command, cwd=project, capture_output=True, text=True, check=False)


def grpc_versions(classpath: str) -> set[str]:
    """The versions of grpc-java's jars on a class path: one, when the BOMs align them (without,
    google-adk's grpc 1.76.2 comes beside the client's 1.85.1)."""
    return set(re.findall(r"/io/grpc/grpc-(?!kotlin)[\w.-]+/([^/]+)/", classpath))


def check(name: str) -> list[str]:
    """What went wrong building and running the ``name`` consumer (nothing: it fetched a context)."""
    consumer = CONSUMERS[name]
    guide = (REPO / consumer.guide).read_text(encoding="utf-8")
    code = blocks(guide, consumer.language)
    if not code:
        return [f"{consumer.guide} has no ```{consumer.language} block"]
    with tempfile.TemporaryDirectory(prefix=f"ce-consumer-{name}-") as tmp:
        project = Path(tmp)
        (project / "pom.xml").write_text(consumer_pom(guide), encoding="utf-8")
        source = project / consumer.source
        source.parent.mkdir(parents=True)
        source.write_text(main_source(consumer, code[0].strip()), encoding="utf-8")

        start = time.monotonic()
        built = maven(project, offline=True)
        how = "offline"
        if built.returncode != 0:
            built = maven(project, offline=False)
            how = "online, after an offline build failed"
        print(f"{name}: mvn package {how}: {time.monotonic() - start:.1f} s", flush=True)
        if built.returncode != 0:
            return [f"{name}: the build failed:\n{built.stdout}\n{built.stderr}"]

        classpath = f"{project / 'target' / 'classes'}:{(project / 'classpath.txt').read_text()}"
        if len(versions := grpc_versions(classpath)) != 1:
            return [f"{name}: grpc-java jars of versions {sorted(versions)} on the class path"]
        start = time.monotonic()
        try:
            ran = subprocess.run(
                ["java", "-cp", classpath, consumer.main_class],
                cwd=project,
                capture_output=True,
                text=True,
                timeout=RUN_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return [f"{name}: the main did not finish in {RUN_TIMEOUT_S:.0f} s"]
        print(f"{name}: java {consumer.main_class}: {time.monotonic() - start:.1f} s", flush=True)
        printed = tuple(ran.stdout.splitlines())
        if ran.returncode != 0 or printed != consumer.expected:
            return [
                f"{name}: the main exited {ran.returncode} and printed {printed!r}, "
                f"expected {consumer.expected!r}:\n{ran.stderr}"
            ]
    return []


def main(argv: list[str]) -> int:
    names = argv or sorted(CONSUMERS)
    unknown = [n for n in names if n not in CONSUMERS]
    if unknown:
        print(f"usage: jvm_consumer.py [{'|'.join(sorted(CONSUMERS))} ...]", file=sys.stderr)
        return 2
    failed = 0
    for name in names:
        problems = check(name)
        for problem in problems:
            print(problem, file=sys.stderr)
        failed += bool(problems)
        print(f"{name}: {'FAILED' if problems else 'fetched a context'}", flush=True)
    print(f"{len(names) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
