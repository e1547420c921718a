"""Payment events as systems write them (nested JSON, or Avro records of a registered schema), the
feature spec the worker reads them through, bad events with the reason each must be refused
with, and the examples the spec defines computed here by hand, apart from the package's
extraction: each feature written out, the standardized ones through river's
``preprocessing.StandardScaler``, learned by a plain loop of the update
(``stream_perceptron.Perceptron.learn_one``) in offset order.

An event exercises every kind of value the spec reads: a string category, an enum symbol (Avro),
an integer and a boolean as categories, a list of categories (a bag), a boolean as a number,
words of a text, and fields missing (absent, or null) under each missing-field policy.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson
from river import preprocessing

from stream_perceptron import Perceptron

SPEC: dict[str, Any] = {
    "label": "outcome.fraud", "positive": [True, "fraud"], "negative": [False, "legit"],
    "id": "payment.id", "echo": ["payment.id", "user.id"],
    "numeric": {
        "payment.amount": {"transform": "log1p", "standardize": True, "missing": "dead-letter"},
        "user.age": {"clip": [18, 90], "standardize": True},  # missing: absent
        "user.verified": {"missing": "zero"},  # a boolean as 0/1
    },
    "categorical": ["payment.method", "user.segments", "user.premium", "user.tier", "device.os"],
    "text": {"note": {"max_tokens": 4}},
}
"""The worker's feature spec (``SP_FEATURES__*``); the hand-written features below follow it."""

SPEC_TOML = """\
[features]
label = "outcome.fraud"
positive = [true, "fraud"]
negative = [false, "legit"]
id = "payment.id"
echo = ["payment.id", "user.id"]
categorical = ["payment.method", "user.segments", "user.premium", "user.tier", "device.os"]

[features.numeric]
"payment.amount" = { transform = "log1p", standardize = true, missing = "dead-letter" }
"user.age" = { clip = [18, 90], standardize = true }
"user.verified" = { missing = "zero" }

[features.text]
note = { max_tokens = 4 }
"""
""":data:`SPEC` as the TOML file ``SP_FEATURES__SPEC`` names (for worker processes)."""

METHODS = ("card", "wallet", "transfer")
SEGMENTS = ("web", "app", "returning", "new")
SYSTEMS = ("ios", "android", "linux")
WORDS = ("Gift", "card", "urgent", "REFUND", "order", "gift", "weekend", "Order")
POSITIVE, NEGATIVE = (True, "fraud"), (False, "legit")


def payments(n: int, seed: int = 0, *, start: int = 0, labels: str = "most",
             missing: bool = True) -> list[dict[str, Any]]:
    """``n`` good payment events (ids ``p{start}``…); fraud when large and by transfer, or
    from a new user (noisy, so the perceptron keeps making mistakes). ``labels``: ``most``
    (one in seven unlabeled: no outcome, or a null one), ``all`` or ``none``. With
    ``missing``, optional fields are sometimes absent and sometimes null."""
    rng = random.Random(seed)
    out = []
    for i in range(start, start + n):
        amount = round(math.exp(rng.gauss(4, 1)), 2)
        method = rng.choice(METHODS)
        segments = rng.sample(SEGMENTS, rng.randint(1, 3))
        fraud = amount > 80 and method == "transfer" or "new" in segments and rng.random() < 0.3
        user: dict[str, Any] = {"id": rng.randrange(10_000), "age": rng.randint(10, 99),
                                "verified": rng.random() < 0.6, "segments": segments,
                                "premium": rng.random() < 0.3, "tier": rng.randint(1, 3)}
        event: dict[str, Any] = {"payment": {"id": f"p{i}", "amount": amount, "method": method},
                                 "user": user, "device": {"os": rng.choice(SYSTEMS)},
                                 "note": " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6)))}
        if missing:
            for where, key in (("user", "age"), ("user", "verified"), ("user", "premium"),
                               ("user", "tier"), (None, "device"), (None, "note")):
                holder = event if where is None else event[where]
                draw = rng.random()
                if draw < 0.12:
                    del holder[key]
                elif draw < 0.2:
                    holder[key] = None
        if labels == "all" or labels == "most" and i % 7:
            event["outcome"] = {"fraud": rng.choice(POSITIVE if fraud else NEGATIVE)}
        elif labels == "most" and i % 14 == 0:
            event["outcome"] = {"fraud": None}  # a null label: unlabeled too
        out.append(event)
    return out


def _with(event: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A deep copy of ``event`` with the dotted ``path`` set to ``value`` (removed: ``...``)."""
    copy = json.loads(json.dumps(event))
    *parents, last = path.split(".")
    holder = copy
    for step in parents:
        holder = holder.setdefault(step, {})
    if value is ...:
        holder.pop(last, None)
    else:
        holder[last] = value
    return copy


def bad_events(good: dict[str, Any], avro: bool = False) -> list[tuple[dict[str, Any], str]]:
    """Events that break the spec, one way each, made from ``good`` (a labeled event with every
    field), and the start of the reason each must be refused with: the path, then why. With
    ``avro``, only what the Avro schema below lets a writer write."""
    cases = [
        (_with(good, "payment.amount", "12.50"),
         'payment.amount: expected a number or a boolean, got string "12.50"'),
        (_with(good, "payment.amount", None), "payment.amount: missing"),
        (_with(good, "payment.amount", -3.0), "payment.amount: log1p of -3.0 is not defined"),
        (_with(good, "user.age", "41"), 'user.age: expected a number or a boolean, got string "41"'),
        (_with(good, "user.segments", ["web", 2.5]),
         "user.segments: a category is a string, an integer or a boolean, got float 2.5"),
        (_with(good, "payment.method", 2.5),
         "payment.method: a category is a string, an integer or a boolean, got float 2.5"),
        (_with(good, "outcome.fraud", "maybe"),
         'outcome.fraud: "maybe" is neither a positive (true, "fraud") nor a negative (false, "legit")'
         " value"),
        (_with(good, "user.tier", 1.5),
         "user.tier: a category is a string, an integer or a boolean, got float 1.5"),
        (_with(good, "user.id", [1, 2]),
         "user.id: an echo field is a string, a number, a boolean or null, got array"),
        (_with(good, "payment.id", 2.5), "payment.id: an id is a string or an integer, got float"),
    ]
    if avro:
        cases.append((_with(good, "note", b"\xff\x00"), "note: text is a string, got bytes"))
    else:
        cases += [
            (_with(good, "payment.amount", ...), "payment.amount: missing"),
            (_with(good, "note", 12), "note: text is a string, got int 12"),
            (_with(good, "user.verified", "yes"),
             'user.verified: expected a number or a boolean, got string "yes"'),
            (_with(good, "user.segments", ["web", {"k": 1}]),
             "user.segments: a category is a string, an integer or a boolean, got object"),
            (_with(good, "payment", "p1"), "payment.amount: missing"),  # a step into a string
        ]
    return cases


# -- Avro ------------------------------------------------------------------------------------------

def avro_schema(namespace: str, version: int = 1) -> str:
    """The payment schema's JSON text, in ``namespace`` (so each test registers a schema of its
    own: Apicurio gives one text one id). Unions let a writer put a wrong type where the spec
    expects another. Version 2 adds the optional ``channel``, removes the optional ``note`` and
    renames ``device`` to ``platform`` (both optional): backward compatible."""
    method = {"type": "enum", "name": "Method", "symbols": list(METHODS)}
    user = {"type": "record", "name": "User", "fields": [
        {"name": "id", "type": ["long", {"type": "array", "items": "long"}]},
        {"name": "age", "type": ["null", "long", "string"], "default": None},
        {"name": "verified", "type": ["null", "boolean"], "default": None},
        {"name": "segments", "type": {"type": "array", "items": ["string", "double"]}},
        {"name": "premium", "type": ["null", "boolean"], "default": None},
        {"name": "tier", "type": ["null", "long", "double"], "default": None},
    ]}
    fields: list[dict[str, Any]] = [
        {"name": "payment", "type": {"type": "record", "name": "Payment", "fields": [
            {"name": "id", "type": ["string", "double"]},
            {"name": "amount", "type": ["null", "double", "string"]},
            {"name": "method", "type": [method, "double"]},
        ]}},
        {"name": "user", "type": user},
    ]
    device = {"type": "record", "name": "Device", "fields": [{"name": "os", "type": "string"}]}
    if version == 1:
        fields.append({"name": "device", "type": ["null", device], "default": None})
        fields.append({"name": "note", "type": ["null", "string", "bytes"], "default": None})
    else:
        fields.append({"name": "platform", "type": ["null", device], "default": None})
        fields.append({"name": "channel", "type": ["null", "string"], "default": None})
    fields.append({"name": "outcome", "type": ["null", {"type": "record", "name": "Outcome", "fields": [
        {"name": "fraud", "type": ["null", "boolean", "string"], "default": None}]}], "default": None})
    return json.dumps({"type": "record", "name": "PaymentEvent", "namespace": namespace, "fields": fields})


def avro_record(event: dict[str, Any], version: int = 1) -> dict[str, Any]:
    """``event`` as a record of :func:`avro_schema` ``version``: every field there, null where
    the event has none. In version 2 its device is written as ``platform``, and it has no note."""
    user = event["user"]
    record = {"payment": dict(event["payment"]),
              "user": {k: user.get(k) for k in ("id", "age", "verified", "segments", "premium", "tier")},
              "outcome": event.get("outcome")}
    if version == 1:
        record["device"] = event.get("device")
        record["note"] = event.get("note")
    else:
        record["platform"] = event.get("platform", event.get("device"))
        record["channel"] = event.get("channel")
    return record


# -- the examples the spec defines, by hand ---------------------------------------------------------

def _found(event: dict[str, Any], path: str) -> Any:
    """The value at the dotted ``path`` (None where nothing is)."""
    value: Any = event
    for step in path.split("."):
        value = value.get(step) if isinstance(value, dict) else None
    return value


def label_by_hand(event: dict[str, Any]) -> int:
    fraud = _found(event, "outcome.fraud")
    if fraud is None:
        return 0
    return 1 if fraud is True or fraud == "fraud" else -1


def features_by_hand(event: dict[str, Any], scaler: preprocessing.StandardScaler,
                     extra_categories: Iterable[str] = ()) -> dict[str, float]:
    """The example ``event`` makes by :data:`SPEC`, in the spec's order (numeric, categorical,
    text); ``scaler`` (the partition's) learns the standardized features first.
    ``extra_categories``: more categorical paths, after the spec's."""
    standardized = {"payment.amount": math.log1p(event["payment"]["amount"])}
    age = _found(event, "user.age")
    if age is not None:
        standardized["user.age"] = min(max(float(age), 18.0), 90.0)
    scaler.learn_one(standardized)
    x = dict(scaler.transform_one(standardized))
    x["user.verified"] = 1.0 if _found(event, "user.verified") else 0.0  # missing: zero
    bag: list[str] = [f"payment.method={event['payment']['method']}"]
    bag += [f"user.segments={s}" for s in event["user"]["segments"]]
    premium = _found(event, "user.premium")
    if premium is not None:
        bag.append(f"user.premium={'true' if premium else 'false'}")
    for path in ("user.tier", "device.os", *extra_categories):
        value = _found(event, path)
        if value is not None:
            bag.append(f"{path}={value}")
    note = _found(event, "note")
    if note is not None:
        bag += [f"note:{word.lower()}" for word in note.split()[:4]]
    for name in bag:
        x[name] = x.get(name, 0.0) + 1.0
    return x


def echo_by_hand(event: dict[str, Any]) -> dict[str, Any]:
    return {"payment.id": _found(event, "payment.id"), "user.id": _found(event, "user.id")}


@dataclass
class PlainLoop:
    """The update applied in offset order to the examples the spec defines (a partition's)."""

    model: Perceptron = field(default_factory=Perceptron)
    scaler: preprocessing.StandardScaler = field(default_factory=preprocessing.StandardScaler)
    scores: list[float] = field(default_factory=list)
    """Each event's score θ·x+θ0 before its update, in order."""
    kept: dict[str, tuple[dict[str, float], float, int]] = field(default_factory=dict)
    """Unlabeled events waiting for a late label, by id: (features, score, offset)."""
    names: dict[str, None] = field(default_factory=dict)
    """Every feature name of the events predicted, in the order they first came (a worker
    gives a name its index when it first predicts with it, labeled or not)."""
    extra_categories: tuple[str, ...] = ()

    def event(self, event: dict[str, Any], offset: int = -1) -> dict[str, float]:
        x = features_by_hand(event, self.scaler, self.extra_categories)
        self.names.update(dict.fromkeys(x))
        score = self.model.score_one(x)
        self.scores.append(score)
        y = label_by_hand(event)
        if y:
            self.model.learn_one(x, y)
        else:
            self.kept[event["payment"]["id"]] = (x, score, offset)
        return x

    def late_label(self, rid: str, y: int) -> tuple[dict[str, float], float, int, bool]:
        """Learn the kept event ``rid`` with ``y``; its features, score, offset and the mistake
        flag at the join."""
        x, score, offset = self.kept.pop(rid)
        self.model.learn_one(x, y)
        return x, score, offset, self.model.last_mistake

    def state(self) -> dict[str, Any]:
        """What the worker's stored state must hold (``model`` and ``stats["features"]``): the
        weights in the order of :attr:`names` (0 for a name no update has touched), or with
        hashing the columns."""
        s, model = self.scaler, self.model
        if model.hash_bits is None:
            learned = dict(zip(model.feature_names, model.weights.tolist(), strict=True))
            weights, names = [learned.get(name, 0.0) for name in self.names], list(self.names)
        else:  # hashed columns, and no names kept
            weights, names = model.weights.tolist(), []
        return {"weights": weights, "intercept": model.intercept, "mistakes": model.mistakes,
                "features": names,
                "standardization": {name: [float(s.counts[name]), s.means[name], s.vars[name]]
                                    for name in s.counts}}


def stored_as(ckpt: Any) -> dict[str, Any]:
    """A stored state's fields that :meth:`PlainLoop.state` gives."""
    return {"weights": ckpt.model["weights"], "intercept": ckpt.model["intercept"],
            "mistakes": ckpt.model["mistakes"], "features": ckpt.model.get("features", []),
            "standardization": ckpt.stats.get("features")}


def json_values(events: Iterable[dict[str, Any]]) -> list[bytes]:
    return [orjson.dumps(e) for e in events]
