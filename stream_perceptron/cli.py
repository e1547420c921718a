"""The ``stream-perceptron`` command: argv → settings → logging → the command.

Every command reads the same settings (environment ``SP_...``, ``--config FILE`` or
``SP_CONFIG``); options given on the command line win. A bad setting prints one line naming it
and exits 2, and so does a command whose extra is not installed (:mod:`stream_perceptron.extras`:
the console script checks ``[worker]`` before it imports this module).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click
import orjson

from stream_perceptron import __version__
from stream_perceptron.errors import (
    CheckpointError,
    CheckpointExistsError,
    CheckpointUnreadableError,
    KafkaAuthError,
    ProduceInterrupted,
    RegistryRefused,
    SettingsError,
    StreamPerceptronError,
)
from stream_perceptron.extras import require
from stream_perceptron.logs import report_suppressed, setup_logging
from stream_perceptron.settings import Settings, load_settings

F = TypeVar("F", bound=Callable[..., Any])

ExitCodes = Mapping[type[StreamPerceptronError], int]

EXIT_CODES: ExitCodes = {
    StreamPerceptronError: 1,  # a failure: the same command may succeed later
    ProduceInterrupted: 130,  # Ctrl+C, as a shell reports an interrupted command
    CheckpointExistsError: 2,  # fit into a directory holding a model: an option to give
}
"""The exit code of an error that ends a command: the entry of its class, else of the nearest
class it derives from (its MRO). Every command but ``run`` uses this table: what stops them (a
source, a cluster, a file) is 1, a refused login included."""

RUN_EXIT_CODES: ExitCodes = {
    **EXIT_CODES,
    # what `run` refuses at start is a setting to fix: a restart alone would only fail again
    SettingsError: 2,
    KafkaAuthError: 2,
    CheckpointError: 2,
    CheckpointUnreadableError: 1,  # an I/O error: a restart may succeed
    RegistryRefused: 2,  # credentials, a certificate or an address to fix, as a refused Kafka login
}
"""``run``'s table: a Kafka failure after the retries is 1 (the worker has shut down without
checkpointing a batch that did not finish, so a restart replays it)."""


def exit_code(exc: StreamPerceptronError, codes: ExitCodes = EXIT_CODES) -> int:
    """The exit code ``codes`` gives ``exc``: its class's entry, else its nearest base class's.

    >>> exit_code(ProduceInterrupted("stopped")), exit_code(KafkaAuthError("refused"))
    (130, 1)
    >>> [exit_code(e, RUN_EXIT_CODES) for e in (KafkaAuthError("refused"), RegistryRefused("401"))]
    [2, 2]
    """
    return next(codes[cls] for cls in type(exc).__mro__ if cls in codes)


def exits(codes: ExitCodes = EXIT_CODES) -> Callable[[F], F]:
    """A command's errors as one line on stderr and the exit code ``codes`` gives them."""

    def wrap(command: F) -> F:
        @functools.wraps(command)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            try:
                return command(*args, **kwargs)
            except StreamPerceptronError as exc:
                fail(str(exc), exit_code(exc, codes))

        return guarded  # type: ignore[return-value]

    return wrap


def needs(*extras: str) -> Callable[[F], F]:
    """A command that cannot run without ``extras``: one line naming them and exit 2 before it
    starts, where they are not installed."""

    def wrap(command: F) -> F:
        @functools.wraps(command)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            require(f"the {click.get_current_context().info_name} command", *extras)
            return command(*args, **kwargs)

        return guarded  # type: ignore[return-value]

    return wrap


def fail(message: str, code: int = 2) -> NoReturn:
    """Print one clear line to stderr and exit."""
    click.echo(f"stream-perceptron: {message}", err=True)
    sys.exit(code)


def _nested(**flat: Any) -> dict[str, Any]:
    """``{"model.fit_intercept": True}`` → ``{"model": {"fit_intercept": True}}``; None is dropped."""
    out: dict[str, Any] = {}
    for dotted, value in flat.items():
        if value is None:
            continue
        section, _, name = dotted.partition(".")
        if name:
            out.setdefault(section, {})[name] = value
        else:
            out[section] = value
    return out


def settings_from(ctx: click.Context, **overrides: Any) -> Settings:
    """Load the settings with CLI overrides (dotted names), set up logging, or exit 2 with one
    line per invalid setting."""
    return _settings(ctx, overrides, exit_code=2)


def _settings(ctx: click.Context, overrides: dict[str, Any], *, exit_code: int) -> Settings:
    """:func:`settings_from`, exiting ``exit_code`` on an invalid setting."""
    try:
        settings = load_settings(ctx.obj.get("config"), **_nested(**overrides))
    except SettingsError as exc:
        for line in str(exc).splitlines():
            click.echo(f"stream-perceptron: {line}", err=True)
        sys.exit(exit_code)
    setup_logging(settings.log_level, settings.log_format)
    return settings


def cluster_settings_from(ctx: click.Context, **overrides: Any) -> Settings:
    """:func:`settings_from` for commands that talk to a cluster: one line and exit 2 without a bootstrap."""
    return on_a_cluster(settings_from(ctx, **overrides))


def on_a_cluster(settings: Settings) -> Settings:
    """``settings``, or one line and exit 2 when they name no bootstrap."""
    if settings.kafka.bootstrap_servers is None:
        fail("SP_KAFKA__BOOTSTRAP_SERVERS is not set (nor bootstrap_servers under [kafka] in --config)")
    return settings


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--config",
    type=click.Path(dir_okay=False),
    envvar="SP_CONFIG",
    help="TOML settings file (also SP_CONFIG).",
)
@click.version_option(__version__, prog_name="stream-perceptron")
@click.pass_context
def main(ctx: click.Context, config: str | None) -> None:
    """A streaming perceptron worker: learns from Kafka, publishes predictions and statistics."""
    ctx.ensure_object(dict)
    ctx.obj["config"] = config


@main.command()
@click.argument("source")
@click.option("--passes", "--epochs", "-T", "passes", default=1, show_default=True,
              type=click.IntRange(min=1), help="The most passes over SOURCE (--epochs: its old name).")
@click.option("--fit-intercept/--no-fit-intercept", default=None, help="Default: the setting.")
@click.option("--limit", type=click.IntRange(min=1), help="Use the first N examples only.")
@click.option("--checkpoint-dir", type=click.Path(file_okay=False), default="fit-checkpoints",
              show_default=True,
              help="Where the model is written. Never the worker's directory unless named here:"
                   " a worker then starts from this model.")
@click.option("--label", default="y", show_default=True, help="The label's CSV column or JSONL key.")
@click.option("--replace", is_flag=True,
              help="Move the checkpoints --checkpoint-dir already holds to a replaced-<time>"
                   " subdirectory of it; without it, fit refuses a directory that holds a model.")
@click.pass_context
@exits()
def fit(
    ctx: click.Context,
    source: str,
    passes: int,
    fit_intercept: bool | None,
    limit: int | None,
    checkpoint_dir: str | None,
    label: str,
    replace: bool,
) -> None:
    """Train offline on SOURCE: a CSV/JSONL file, river:Phishing|Bananas|Shuttle, or a generator.

    Makes up to --passes passes, stopping after a pass with no mistake; prints each pass's
    mistakes, R, γ and the bound (R/γ)², and writes a checkpoint into a directory that holds
    none (or, with --replace, moves the ones there aside first).
    """
    from stream_perceptron.commands.fit import fit_source

    settings = settings_from(
        ctx, **{"model.fit_intercept": fit_intercept, "checkpoint.dir": checkpoint_dir}
    )
    report = fit_source(settings, source, passes=passes, limit=limit, label=label, replace=replace)
    for line in report.lines():
        click.echo(line)


@main.command()
@click.option("--until-caught-up", is_flag=True,
              help="Stop once every assigned partition is processed to its end.")
@click.pass_context
@exits(RUN_EXIT_CODES)
def run(ctx: click.Context, until_caught_up: bool) -> None:
    """Run the worker: learn from the input topic until SIGTERM/SIGINT."""
    from stream_perceptron.runtime import limit_malloc_arenas
    from stream_perceptron.worker.loop import Worker
    from stream_perceptron.worker.observe import observer_for

    limit_malloc_arenas()  # before any thread: the Kafka clients' threads start in worker.run
    settings = cluster_settings_from(ctx)
    # its own process: SIGTERM and SIGINT stop it, and its shutdown is bounded; a backend not
    # installed: SettingsError
    worker = Worker(settings, owns_process=True, observer=observer_for(settings.observe))
    try:
        code = worker.run(until=Worker.caught_up if until_caught_up else None)
    finally:
        report_suppressed()  # client lines suppressed in the last minute, before any last line
    sys.exit(code)


@main.command()
@click.argument("source")
@click.option("--topic", "-t", help="Default: the input topic setting.")
@click.option("--limit", type=click.IntRange(min=1), help="Send the first N examples only.")
@click.option("--partitions", type=click.IntRange(min=1), default=1, show_default=True,
              help="Partitions of the topic when it has to be created.")
@click.option("--unlabeled-every", type=click.IntRange(min=0), default=0,
              help="Send every k-th record without its label.")
@click.option("--rate", type=click.FloatRange(min=0, min_open=True), help="Records per second.")
@click.option("--label", default="y", show_default=True, help="The label's CSV column or JSONL key.")
@click.pass_context
@exits()
def produce(
    ctx: click.Context, source: str, topic: str | None, limit: int | None, partitions: int,
    unlabeled_every: int, rate: float | None, label: str,
) -> None:
    """Publish SOURCE as input records: a CSV/JSONL file, river:Phishing|Bananas|Shuttle,
    separable:d=20,gamma=0.1,n=100000, sea:n=..., hyperplane:d=10,n=...."""
    from rich.progress import Progress

    from stream_perceptron.commands.produce import check_source, produce_source
    from stream_perceptron.kafka.admin import ensure_topics
    from stream_perceptron.sources import open_source

    settings = cluster_settings_from(ctx)
    name = topic or settings.topics.input
    limits = settings.codec_limits()
    src = open_source(source, limit=limit, label=label, positive_class=limits.positive_class,
                      negative_class=limits.negative_class)
    # a file (or labels read by class name) is read through first: a bad row or an unmatched
    # positive class then stops the run before anything is sent, so running it again once
    # fixed sends no record twice
    checked = src.from_file or limits.positive_class is not None
    length = check_source(src, limits) if checked else src.length
    ensure_topics(settings.kafka, {name: partitions})
    with Progress(transient=False) as progress:
        task = progress.add_task(f"{source} → {name}", total=length)
        sent = produce_source(settings.kafka, src, name, limits=None if checked else limits,
                              unlabeled_every=unlabeled_every, rate=rate,
                              on_progress=lambda n: progress.advance(task, n))
    click.echo(f"sent {sent} records to {name}")


@main.command()
@click.argument("sample", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--topic", "-t", help="Read the topic's first records instead of a file (default, without"
              " SAMPLE: the input topic setting).")
@click.option("--limit", "-n", default=20, show_default=True, type=click.IntRange(min=1),
              help="Read the first N events.")
@click.option("--json", "as_json", is_flag=True,
              help="Print JSON lines instead: one per event, then one {\"summary\": ...}.")
@click.pass_context
@exits()
def features(ctx: click.Context, sample: Path | None, topic: str | None, limit: int, as_json: bool) -> None:
    """What the feature spec (SP_FEATURES__*) makes of sample events: SAMPLE, a JSONL file of
    events (one JSON object a line), or the first --limit records of a topic (SP_INPUT__FORMAT
    json or avro, through the schema registry SP_REGISTRY__*).

    Prints each event as the worker would take it: an example (its label, id, features as it
    would learn them, standardized as a fresh partition would, and echo fields), a label record,
    or a dead letter with its reason; then a summary: the dead letters by reason, how often each
    path held a value, was missing or had a wrong type, the paths that never matched, the
    categories seen and the fields no path reads.
    """
    from stream_perceptron.codec.events import Parse
    from stream_perceptron.commands.features import avro_parse, file_samples, report, topic_samples
    from stream_perceptron.contract import json_object
    from stream_perceptron.kafka.registry import SchemaRegistry

    if sample is not None and topic is not None:
        fail("give a SAMPLE file or --topic TOPIC: one of them")
    settings = settings_from(ctx, log_level="WARNING")
    spec = settings.features.feature_spec()
    if spec is None:
        fail("no feature spec: set SP_FEATURES__SPEC to a TOML file holding it (or write the config"
             " file's [features] table)")
    parse: Parse = json_object
    if sample is not None:
        samples = list(file_samples(sample, limit))
    else:
        name = topic or on_a_cluster(settings).topics.input
        samples = topic_samples(settings.kafka, name, limit,
                                max_record_bytes=settings.limits.max_record_bytes)
        if settings.input.format == "avro":
            parse = avro_parse(SchemaRegistry.from_settings(settings.registry))
    found = report(spec, samples, settings.codec_limits(), parse=parse,
                   late_labels=settings.labels.pending_max > 0)
    for line in found.json_lines() if as_json else found.lines():
        click.echo(line)


@main.command()
@click.option("--port", default=9092, show_default=True, type=click.IntRange(1, 65535))
@click.option("--host", default="127.0.0.1", show_default=True)
@needs("embedded")
@exits()
def broker(port: int, host: str) -> None:
    """Run the embedded Kafka-protocol broker (tansu, memory only) until interrupted."""
    from stream_perceptron.commands.broker import EmbeddedBroker
    from stream_perceptron.signals import stopping_on_signals

    setup_logging("INFO")
    # handlers first: a signal may come as soon as the port opens
    with stopping_on_signals() as stopping:
        embedded = EmbeddedBroker(port=port, host=host)
        embedded.start()
        click.echo(f"embedded broker listening on {embedded.bootstrap} (Ctrl+C stops it; data is in memory)")
        try:
            while embedded.running and not stopping.wait(0.2):
                pass
        finally:
            embedded.stop()
    if not stopping.is_set():
        fail("the embedded broker exited on its own", 1)


@main.command()
@click.option("--limit", type=click.IntRange(min=1), help="Stream the first N examples only.")
@click.option("--source", default="river:Shuttle", show_default=True)
@click.option("--out", default="demo-output", show_default=True,
              type=click.Path(file_okay=False, path_type=Path))
@click.option("--multiclass", is_flag=True,
              help="Stream river's synth.LED (10 classes, 50,000 records) through a K-class worker.")
@click.option("--verbose", is_flag=True, help="Show the worker's log lines too.")
@click.pass_context
@exits()
def demo(ctx: click.Context, limit: int | None, source: str, out: Path, multiclass: bool,
         verbose: bool) -> None:
    """Stream river's Shuttle (49,097 records, in order) through a worker and plot its mistake rate.

    Without a configured bootstrap it starts the embedded broker; with one it uses that cluster.
    With --multiclass: river's synth.LED digits, 10 classes, and each class's mistake rate.
    """
    import contextlib
    import secrets
    import time

    from stream_perceptron.commands.broker import EmbeddedBroker
    from stream_perceptron.commands.demo import LED_EXAMPLES, led_source, run_demo

    if multiclass and ctx.get_parameter_source("source") is not click.core.ParameterSource.DEFAULT:
        fail("--multiclass streams synth.LED; --source names the binary demo's dataset: give one", 2)
    base = settings_from(ctx, log_level=None if verbose else "WARNING")
    # its plot at the end, and the embedded broker unless a cluster is configured
    require("the demo command", *(("plot",) if base.kafka.bootstrap_servers else ("plot", "embedded")))
    # the time, and 6 random hex digits: two demos started in one second (on one cluster, from
    # two hosts even) get topics, a group and a directory of their own
    run_id = f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
    run_dir = out / f"run-{run_id}"
    try:  # before the demo runs, not after: its plot and checkpoints go there
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        fail(f"cannot write the demo's output to {run_dir} (--out): {exc}", 1)
    with contextlib.ExitStack() as stack:
        bootstrap = base.kafka.bootstrap_servers
        if bootstrap is None:
            embedded = EmbeddedBroker()
            embedded.start()
            stack.callback(embedded.stop)
            bootstrap = embedded.bootstrap
            click.echo(f"started the embedded broker on {bootstrap}", err=True)
        prefix = f"sp-demo-{run_id}"
        settings = settings_from(ctx, **{
            "kafka.bootstrap_servers": bootstrap,
            "kafka.group_id": prefix,
            "kafka.session_timeout_ms": 6000,
            "kafka.heartbeat_interval_ms": 1000,
            "topics.input": f"{prefix}-examples",
            "topics.predictions": f"{prefix}-predictions",
            "topics.stats": f"{prefix}-stats",
            "topics.dead_letter": f"{prefix}-dead-letters",
            "checkpoint.dir": str(run_dir / "checkpoints"),
            "observe.port": 0,
            "kafka.max_poll_records": 500,
            "stats.every_examples": 500,
            "log_level": None if verbose else "WARNING",
            **({"model.classes": list(range(10))} if multiclass else {}),
        })
        summary = run_demo(settings, run_dir, source_spec=source, limit=limit,
                           source=led_source(limit or LED_EXAMPLES) if multiclass else None)
    for line in summary.lines():
        click.echo(line)


@main.command()
@click.option("--url", help="Default: http://<observe.host>:<observe.port>/readyz (or /healthz with"
                           " --live), where a wildcard host is asked on loopback.")
@click.option("--live", is_flag=True, help="Check liveness (/healthz) instead of readiness.")
@click.option("--timeout", default=3.0, show_default=True, type=click.FloatRange(min=0, min_open=True))
@click.pass_context
def health(ctx: click.Context, url: str | None, live: bool, timeout: float) -> None:
    """Probe a running worker: exit 0 when ready (or alive with --live), else 1, an invalid
    setting included (a container's HEALTHCHECK reserves 2). For exec probes."""
    from stream_perceptron.worker.observe import probe

    if url is None:
        settings = _settings(ctx, {"log_level": "WARNING"}, exit_code=1)
        host = settings.observe.host
        host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)  # noqa: S104
        host = f"[{host}]" if ":" in host else host
        url = f"http://{host}:{settings.observe.port}/{'healthz' if live else 'readyz'}"
    ok, body = probe(url, timeout)
    click.echo(f"{'ok' if ok else 'not ok'}: {url} {body.strip()}")
    sys.exit(0 if ok else 1)


@main.command()
@click.option("--topic", "-t", help="Default: the stats topic setting.")
@click.option("--refresh", default=1.0, show_default=True, type=click.FloatRange(min=0.1),
              help="Seconds between redraws.")
@click.option("--duration", type=click.FloatRange(min=0, min_open=True), help="Stop after N seconds.")
@click.option("--json", "as_json", is_flag=True,
              help="Print JSON lines instead: one per partition (and the group's, and each new drift"
                   " alarm) every --refresh seconds.")
@click.pass_context
@exits()
def watch(ctx: click.Context, topic: str | None, refresh: float, duration: float | None,
          as_json: bool) -> None:
    """The statistics topic live in the terminal: a table of the partitions and the group (Ctrl+C
    stops it). Without a terminal, plain lines: one per partition every --refresh seconds."""
    from stream_perceptron.commands.watch import WatchOutput, run_watch

    settings = cluster_settings_from(ctx, log_level="WARNING")
    output: WatchOutput = "json" if as_json else "table" if sys.stdout.isatty() else "plain"
    code = run_watch(settings.kafka, topic or settings.topics.stats, refresh_s=refresh,
                     duration_s=duration, output=output)
    sys.exit(code)


@main.command()
@click.option("--topic", "-t", help="Default: the stats topic setting.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="The address to serve on (keep it local, or set SP_DASHBOARD__TOKEN: every page then"
                   " asks for the token).")
@click.option("--port", "-p", default=8765, show_default=True, type=click.IntRange(0, 65535),
              help="0 takes a free port.")
@click.option("--refresh", default=1.0, show_default=True, type=click.FloatRange(min=0.1),
              help="Seconds between the page's updates.")
@click.option("--duration", type=click.FloatRange(min=0, min_open=True), help="Stop after N seconds.")
@click.pass_context
@exits()
def dashboard(ctx: click.Context, topic: str | None, host: str, port: int, refresh: float,
              duration: float | None) -> None:
    """A live web page of the statistics topic for the whole group: each partition's mistake
    rates with its drift alarms, margins, R, γ and (R/γ)², throughput, lag, pending labels
    (Ctrl+C stops it)."""
    from stream_perceptron.commands.dashboard import run_dashboard

    settings = cluster_settings_from(ctx, log_level="WARNING")
    stats = topic or settings.topics.stats

    def ready(url: str) -> None:
        click.echo(f"dashboard of {stats} at {url} (Ctrl+C stops it)")

    token = settings.dashboard.token
    sys.exit(run_dashboard(settings.kafka, stats, host=host, port=port, refresh_s=refresh,
                           duration_s=duration, on_ready=ready,
                           token=None if token is None else token.get_secret_value()))


@main.command()
@click.option("--topic", "-t", help="Default: the stats topic setting.")
@click.option("--out", "-o", default="stats.png", show_default=True,
              type=click.Path(dir_okay=False, path_type=Path))
@click.option("--client-id", help="Only the partitions whose newest record this worker published (a "
              "client id), or, for an older worker's records, a column of `watch` ('CLIENT_ID · MODEL').")
@click.pass_context
@needs("plot")
@exits()
def plot(ctx: click.Context, topic: str | None, out: Path, client_id: str | None) -> None:
    """A PNG of the statistics topic's history: each partition's mistake rate and the group's
    (E_n over all labeled examples), and the window's min margin."""
    from stream_perceptron.commands.watch import run_plot

    settings = cluster_settings_from(ctx, log_level="WARNING")
    path, used, of = run_plot(settings.kafka, topic or settings.topics.stats, out, client_id=client_id)
    drawn = f"{used}" if used == of else f"{used} (evenly spaced) of {of}"
    click.echo(f"wrote {path} from {drawn} statistics records")


@main.command()
@click.option("--topic", "-t", help="Default: the model topic setting (SP_MIX__TOPIC).")
@click.option("--follow", "-f", is_flag=True, help="Go on reading: print each new mix as it comes"
              " (SIGINT or SIGTERM stops it).")
@click.option("--score", "rows", multiple=True, metavar="JSON_ROW",
              help='A dense row, like "[0.5, 1.0]", to score with each mix (repeatable).')
@click.pass_context
@exits()
def mixed(ctx: click.Context, topic: str | None, follow: bool, rows: tuple[str, ...]) -> None:
    """Print the newest mix of each input partition from the model topic, one JSON line each:
    topic, partition, epoch, offset, weights, intercept, partitions, mu (and with --score, each
    row's scores and predictions)."""
    from stream_perceptron.commands.mixed import mixed_lines, parse_row
    from stream_perceptron.signals import stopping_on_signals

    try:
        parsed = [parse_row(r) for r in rows]
    except StreamPerceptronError as exc:  # an option to fix
        fail(str(exc))
    settings = cluster_settings_from(ctx, log_level="WARNING", **{"mix.topic": topic})
    with stopping_on_signals() as stop:
        for out in mixed_lines(settings, rows=parsed, follow=follow, stop=stop):
            click.echo(orjson.dumps(out).decode())


@main.group()
def checkpoint() -> None:
    """Inspect checkpoints, and export a model to river or scikit-learn."""


@checkpoint.command("export")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--to", "to", type=click.Choice(["river", "sklearn"]), required=True,
              help="river: a pickle of river's linear_model.Perceptron; sklearn: a joblib file of"
                   " scikit-learn's linear_model.Perceptron.")
@click.option("--checkpoint-dir", type=click.Path(file_okay=False, path_type=Path),
              help="The directory of the state (default: the SP_CHECKPOINT__DIR setting).")
@click.option("--partition", help="TOPIC:N, when the directory holds the states of several partitions.")
@click.pass_context
@exits()
def checkpoint_export(ctx: click.Context, file: Path, to: str, checkpoint_dir: Path | None,
                      partition: str | None) -> None:
    """Write the model of a stored state to FILE as river's or scikit-learn's Perceptron: the same
    weights, intercept, feature order and classes (the averaged weights of an averaged model).
    The state is the directory's one partition, --partition's, or its initial model (a fit's)."""
    from stream_perceptron.commands.checkpoint import export

    setup_logging("WARNING")
    directory = checkpoint_dir
    if directory is None:
        directory = Path(settings_from(ctx).checkpoint.dir)
    click.echo(orjson.dumps(export(directory, to, file, partition)).decode())


@checkpoint.command("show")
@click.argument("directory", required=False, type=click.Path(file_okay=False, path_type=Path))
@click.option("--topic", "-t", help="The Kafka store's state topic (SP_CHECKPOINT__STORE=kafka) to show"
              " instead of a directory; the cluster is SP_KAFKA__* (or --bootstrap-servers).")
@click.option("--bootstrap-servers", help="With --topic: host:port[,host:port] (default: the setting).")
@click.pass_context
@exits()
def checkpoint_show(ctx: click.Context, directory: Path | None, topic: str | None,
                    bootstrap_servers: str | None) -> None:
    """Print the stored states in DIRECTORY, or in the state topic --topic, as one JSON object:
    "partitions" maps "topic:partition" to that partition's state (weights, intercept, mistakes,
    seen, labeled, next_offset, ...); a single partition's keys are at the top level as well."""
    from stream_perceptron.commands.checkpoint import show_directory, show_topic

    if directory is not None and topic is None and bootstrap_servers is None:
        setup_logging("WARNING")
        out = show_directory(directory)
    elif topic is not None and directory is None:
        settings = cluster_settings_from(ctx, log_level="WARNING",
                                         **{"kafka.bootstrap_servers": bootstrap_servers})
        out = show_topic(settings.kafka, topic)
    else:
        fail("give a checkpoint DIRECTORY, or --topic TOPIC (the Kafka store's state topic) with the"
             " cluster's settings: one of them")
    click.echo(orjson.dumps(out).decode())


if __name__ == "__main__":  # pragma: no cover
    main()
