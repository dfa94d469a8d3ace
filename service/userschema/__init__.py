"""Your own schema: a user's message type in the three forms the codecs take.

`load_schema("orders:Order")` (a pydantic v2 model or msgspec Struct) or
`load_schema("orders.proto:Order")` returns a `UserSchema` whose `struct`, `model`
and `proto` plug into the codecs as the built-in schemas' do; `make_payloads` makes
seeded synthetic payloads for it; `read_native` and `diff` compare decoded objects
of any form field by field.
"""

from service.userschema.compare import diff, read_native
from service.userschema.loader import UserSchema, from_class, load_schema
from service.userschema.shape import MessageShape
from service.userschema.synth import SynthOptions, make_payloads

__all__ = [
    "MessageShape",
    "SynthOptions",
    "UserSchema",
    "diff",
    "from_class",
    "load_schema",
    "make_payloads",
    "read_native",
]
