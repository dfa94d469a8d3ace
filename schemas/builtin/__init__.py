"""The built-in schemas (`small`, `medium`, `large`) in every hand-written form.

| file | holds |
| --- | --- |
| `messages.proto`, `pb/` | the source of truth and its generated module (`make proto`) |
| `structs` | the msgspec Structs, field for field as `messages.proto` |
| `pydantic_forms` | the pydantic models, kept in step with the Structs by tests |

May import the libraries only.
"""
