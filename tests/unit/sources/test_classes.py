"""Tests for stream_perceptron.sources.classes: fixed spellings and class names."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from stream_perceptron.cli import main
from stream_perceptron.errors import SourceError
from stream_perceptron.sources import no_positive_class, open_source

from .support import write


def test_csv_label_column_and_positive_class(tmp_path: Path) -> None:
    path = write(tmp_path / "d.csv", "species,f1,f2\ncat,1,2\ndog,3,4\n cat ,5,6\n")
    src = open_source(str(path), label="species", positive_class="cat")
    assert src.feature_names == ["f1", "f2"]
    assert [y for _, y in src] == [1, -1, 1]
    with pytest.raises(SourceError, match=r"d\.csv:2: .*'cat'.*SP_LIMITS__POSITIVE_CLASS"):
        list(open_source(str(path), label="species"))


def test_csv_labels_with_both_class_names_are_strict(tmp_path: Path) -> None:
    # every CSV label is text: with only a positive class, any other is the rest (-1); with a
    # negative class too, a label that is neither is refused, as the worker refuses it
    path = write(tmp_path / "d.csv", "species,f1\ncat,1\ndog,3\n1,5\n")
    assert [y for _, y in open_source(str(path), label="species", positive_class="cat")] == [1, -1, -1]
    strict = open_source(str(path), label="species", positive_class="cat", negative_class="dog")
    with pytest.raises(SourceError, match=r"d\.csv:4: label '1' is neither the positive class 'cat'"
                                          r" nor the negative class 'dog'"):
        list(strict)
    # a negative class alone names the -1 class; the fixed spellings keep their meaning
    path.write_text("species,f1\ndog,3\n1,5\n")
    assert [y for _, y in open_source(str(path), label="species", negative_class="dog")] == [-1, 1]


def test_a_text_label_spells_a_bool_or_a_number_signed_by_the_contract(tmp_path: Path) -> None:
    spelled = ["1", "+1", "1.0", "1.00", "1e0", "TRUE", "0", "-0", "0.0", "-1", "-1.0", "False"]
    path = write(tmp_path / "d.csv", "f1,y\n" + "".join(f"1,{y}\n" for y in spelled))
    assert [y for _, y in open_source(str(path))] == [1] * 6 + [-1] * 6
    for bad in ("2", "nan", "inf", "yes", "\u0661"):  # U+0661, ARABIC-INDIC DIGIT ONE
        path.write_text(f"f1,y\n1,{bad}\n", encoding="utf-8")
        with pytest.raises(SourceError, match=r"d\.csv:2: label .* is not -1/1, 0/1 or true/false"):
            list(open_source(str(path)))


def test_no_positive_class_in_the_data_is_named() -> None:
    with pytest.raises(SourceError, match=r"^f\.csv: no label is the positive class 'spam' "
                                          r"\(SP_LIMITS__POSITIVE_CLASS or \[limits\] in --config\),"
                                          r" so all 4 examples"):
        no_positive_class("f.csv", "spam", 4, 0)
    no_positive_class("f.csv", "spam", 4, 1)
    no_positive_class("f.csv", None, 4, 0)


SPECIES = "species,f1\ncat,1\ndog,3\n1,5\n"


@pytest.mark.parametrize(
    "refuse",
    [
        lambda path: list(open_source(path, label="species")),
        lambda path: list(open_source(path, label="species", positive_class="cat", negative_class="dog")),
        lambda path: no_positive_class(path, "spam", 3, 0),
        lambda path: open_source("river:ImageSegments"),
    ],
    ids=["class-names-but-none-named", "a-third-class", "a-misspelt-class", "a-multi-class-dataset"],
)
def test_messages_name_the_setting_a_user_sets_not_the_field(
    tmp_path: Path, refuse: Callable[[str], object]
) -> None:
    # fit and produce have no class option: they read the worker's settings, so the setting to
    # name is the environment variable (or the [limits] table of --config), as for the worker
    with pytest.raises(SourceError) as info:
        refuse(str(write(tmp_path / "d.csv", SPECIES)))
    message = str(info.value)
    assert "SP_LIMITS__POSITIVE_CLASS" in message
    assert not re.search(r"\b(positive|negative)_class\b", message)


def test_fit_with_the_setting_the_message_names_reads_class_names(tmp_path: Path) -> None:
    path = write(tmp_path / "d.csv", "a,y\n1,spam\n-1,ham\n")
    fit = ["fit", str(path), "--checkpoint-dir"]
    refused = CliRunner().invoke(main, [*fit, str(tmp_path / "no")], env={})
    assert refused.exit_code == 1
    assert "name the positive class with SP_LIMITS__POSITIVE_CLASS or [limits] in --config" in refused.output
    by_env = CliRunner().invoke(main, [*fit, str(tmp_path / "env")],
                                env={"SP_LIMITS__POSITIVE_CLASS": "spam"})
    assert by_env.exit_code == 0, by_env.output
    config = write(tmp_path / "sp.toml", '[limits]\npositive_class = "spam"\n')
    by_config = CliRunner().invoke(main, ["--config", str(config), *fit, str(tmp_path / "toml")], env={})
    assert by_config.exit_code == 0, by_config.output
