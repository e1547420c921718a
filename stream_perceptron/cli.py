"""The ``stream-perceptron`` command: argv → settings → logging → the command.

Every command reads the same settings (environment ``SP_...``, ``--config FILE`` or
``SP_CONFIG``); options given on the command line win. A bad setting prints one line naming it
and exits 2.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click
import orjson

from stream_perceptron import __version__
from stream_perceptron.errors import CheckpointError, SettingsError, StreamPerceptronError
from stream_perceptron.logs import setup_logging
from stream_perceptron.settings import Settings, load_settings

F = TypeVar("F", bound=Callable[..., Any])


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
        out.setdefault(section, {})[name] = value
    return out


def settings_from(ctx: click.Context, **overrides: Any) -> Settings:
    """Load the settings with CLI overrides (dotted names), set up logging, or exit with one line."""
    try:
        settings = load_settings(ctx.obj.get("config"), **_nested(**overrides))
    except SettingsError as exc:
        for line in str(exc).splitlines():
            click.echo(f"stream-perceptron: {line}", err=True)
        sys.exit(2)
    setup_logging(settings.log_level, settings.log_format)
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
@click.option("--epochs", "-T", default=1, show_default=True, type=click.IntRange(min=1))
@click.option("--fit-intercept/--no-fit-intercept", default=None, help="Default: the setting.")
@click.option("--limit", type=click.IntRange(min=1), help="Use the first N examples only.")
@click.option("--checkpoint-dir", type=click.Path(file_okay=False), help="Default: the setting.")
@click.option("--label", default="y", show_default=True, help="CSV label column.")
@click.pass_context
def fit(
    ctx: click.Context,
    source: str,
    epochs: int,
    fit_intercept: bool | None,
    limit: int | None,
    checkpoint_dir: str | None,
    label: str,
) -> None:
    """Train offline on SOURCE: a CSV/JSONL file, river:Phishing|Bananas|Shuttle, or a generator.

    Makes up to --epochs passes, stopping after a pass with no mistake; prints each pass's
    mistakes, R, γ and the bound (R/γ)², and writes a checkpoint.
    """
    from stream_perceptron.offline import fit_source

    settings = settings_from(
        ctx, **{"model.fit_intercept": fit_intercept, "checkpoint.dir": checkpoint_dir}
    )
    try:
        report = fit_source(settings, source, epochs=epochs, limit=limit, label=label)
    except StreamPerceptronError as exc:
        fail(str(exc), 1)
    for line in report.lines():
        click.echo(line)


@main.group()
def checkpoint() -> None:
    """Inspect checkpoints."""


@checkpoint.command("show")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
def checkpoint_show(directory: Path) -> None:
    """Print the newest valid checkpoint in DIRECTORY as one JSON object."""
    from stream_perceptron.checkpoint import CheckpointStore, fingerprint
    from stream_perceptron.stats import RunningStats

    setup_logging("WARNING")
    if not directory.is_dir():
        fail(f"{directory} is not a directory", 1)
    try:
        ckpt = CheckpointStore(directory).load()
    except CheckpointError as exc:
        fail(str(exc), 1)
    if ckpt is None:
        fail(f"no valid checkpoint in {directory}", 1)
    stats = RunningStats(ckpt.stats["window"], ckpt.stats["ewma_alpha"])
    stats.set_state(ckpt.stats)
    out = {
        "path": str(ckpt.path),
        "seq": ckpt.seq,
        "created": ckpt.created,
        "config": ckpt.config,
        "fingerprint": fingerprint(ckpt.config),
        **ckpt.model,
        "seen": stats.seen,
        "labeled": stats.labeled,
        "offsets": ckpt.body()["offsets"],
        "stats": stats.snapshot(),
    }
    click.echo(orjson.dumps(out).decode())


if __name__ == "__main__":  # pragma: no cover
    main()
