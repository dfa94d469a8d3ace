"""Which codecs can run a team's schema, and what the measured ones skip or do not run.

Read once, while the plan is built (`abrunner.cli.plan_from_settings`): the codecs a
user's schema leaves out (with why), the checks of the user's own form a kept codec
skips, the validators a codec's derived Struct runs (`--run-validators`) and the
model's code a codec does not run; the plan keeps them as lines for the report.
"""

from __future__ import annotations

from codec import codec_refusal
from schemas.errors import ConfigError
from schemas.registry import user_schema
from schemas.user.skipped_checks import Skipped, skipped_checks
from schemas.user.synthetic import make_payloads
from schemas.user.validators import not_run, ran_by


def schema_limits(
    spec: str | None,
    codecs: tuple[str, ...],
    *,
    synthetic: bool = True,
    named: bool = False,
) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...], tuple[str, ...]]:
    """For a user's schema: the codecs that can run it, those left out (with why),
    and the checks of the user's form a kept codec skips.

    Args:
        spec: the `--schema` setting (None: a built-in profile).
        codecs: the codecs of the run.
        synthetic: payloads are made (not replayed).
        named: the codecs were named (`--codecs`): each must carry the schema.

    Raises:
        ConfigError: a named codec cannot carry the schema (every such codec and
            field, a line each), or none of the default ones can; or, for
            synthetic payloads, a field none can be made for (every such field
            named), so that no case starts a worker for nothing.
    """
    user = None if spec is None else user_schema(spec)
    if user is None:
        return codecs, (), ()
    if synthetic:
        make_payloads(user.shape, 1)
    left_out = tuple(
        (codec, why)
        for codec in codecs
        if (why := codec_refusal(codec, user)) is not None
    )
    kept = tuple(c for c in codecs if c not in dict(left_out))
    if named and left_out:
        raise ConfigError(
            "--codecs: "
            + "; ".join(why.removeprefix("schema error: ") for _, why in left_out)
        )
    if not kept:
        raise ConfigError("; ".join(why for _, why in left_out))
    skipped = tuple(
        Skipped(tuple(c for c in s.codecs if c in kept), s.path, s.check).line()
        for s in skipped_checks(user.shape, user.source)
        if any(c in kept for c in s.codecs)
    )
    return kept, left_out, skipped


def validator_lines(
    spec: str | None, codecs: tuple[str, ...], run_validators: bool
) -> tuple[str, ...]:
    """The user's validators that a measured codec runs in its derived Struct
    (`--run-validators`), a line each; () without it or for a built-in profile."""
    user = None if spec is None or not run_validators else user_schema(spec)
    return () if user is None else tuple(ran_by(user.with_validators(), codecs))


def code_not_run(
    spec: str | None, codecs: tuple[str, ...], run_validators: bool = False
) -> tuple[str, ...]:
    """The code of a user's model that a measured codec does not run, a line each
    (`codec-schema check` lists the same); () for a built-in profile.

    Args:
        spec: the `--schema` setting (None: a built-in profile: none).
        codecs: the codecs that run.
        run_validators: the workers run the after validators in the derived
            Structs, so those are not listed as not run by the codecs that do.
    """
    user = None if spec is None else user_schema(spec)
    if user is None:
        return ()
    if run_validators:
        user = user.with_validators()
    return tuple(n.line() for n in not_run(user, codecs))
