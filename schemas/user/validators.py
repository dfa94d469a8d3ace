"""The code of a team's model that a codec does not run: validators, computed fields.

A pydantic model's `field_validator`, `model_validator` (any mode), `AfterValidator`/
`BeforeValidator`/`WrapValidator`/`PlainValidator` annotations, string transforms
and computed fields run in the three pydantic codecs only: the derived forms (msgspec
Structs, protobuf, FlatBuffers, Cap'n Proto, Avro) decode the declared types and
nothing more. That is reported, never refused: a team choosing a codec needs to know
which of its rules would stop running and what that means for the values, and a CPU
figure of a codec that skips them is cheaper by their cost. `codec-schema check`
prints `not_run` and, with `--run-validators`, `ran_by`: which derived codecs ran
the model's after validators (`schemas.user.struct_validators`); the A/B report
prints the same for the codecs it measured.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from schemas.formats import DERIVED_CODECS, PYDANTIC_CODECS
from schemas.user.loader import UserSchema
from schemas.user.struct_validators import NESTED

RAN_BY: Final = PYDANTIC_CODECS
"""The codecs that run a model's own code (they decode into the model itself)."""


@dataclass(frozen=True, slots=True)
class NotRun:
    """One piece of the model's code that some codecs do not run.

    Attributes:
        codecs: the codecs that do not run it.
        path: the field's dotted path (the model's, for a model-wide one).
        what: the code as declared (`field_validator(mode='after') 'upper'`).
        effect: what not running it means for the values decoded.
    """

    codecs: tuple[str, ...]
    path: str
    what: str
    effect: str

    def line(self) -> str:
        """`Shipment.tracking: field_validator 'upper' not run by msgspec-json: ...`."""
        return f"{self.path}: {self.what} not run by {', '.join(self.codecs)}: {self.effect}"


def not_run(schema: UserSchema, codecs: Iterable[str] = DERIVED_CODECS) -> list[NotRun]:
    """The code of `schema`'s own model that each of `codecs` does not run.

    With `--run-validators` (`UserSchema.with_validators`), the codecs that
    decode into the Struct run its runnable after validators and are not listed
    for them; what cannot run on a Struct says why.

    Args:
        schema: a user's schema (a pydantic model's notes; none for other sources).
        codecs: the codecs of interest (those a check or a run measured); the
            pydantic codecs run the model's code and are never listed.
    """
    skipping = tuple(c for c in codecs if c not in RAN_BY)
    if not skipping:
        return []
    why = {(p, w): reason for p, w, reason in schema.on_struct}
    out = []
    for path, what, effect in schema.notes:
        reason = why.get((path, what), NESTED)
        ran = schema.validators_run_by if not reason else ()
        left = tuple(c for c in skipping if c not in ran)
        if left and schema.validators_run_by and reason:
            effect = f"{effect} ({reason})"
        if left:
            out.append(NotRun(left, path, what, effect))
    return out


def ran_by(schema: UserSchema, codecs: Iterable[str] = DERIVED_CODECS) -> list[str]:
    """`"PATH: WHAT run by CODECS"` for each validator of the model a derived
    codec of `codecs` runs (`--run-validators`); empty without the option."""
    running = tuple(c for c in codecs if c in schema.validators_run_by)
    if not running:
        return []
    return [
        f"{path}: {what} run by {', '.join(running)} (--run-validators)"
        for path, what, why in schema.on_struct
        if not why
    ]
