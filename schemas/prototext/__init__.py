"""`.proto` text read without protoc: a proto3 parser to a `FileDescriptorProto`.

| module | holds |
| --- | --- |
| `lexer` | the tokens of `.proto` text and the parser's cursor |
| `parser` | proto3 text to a `FileDescriptorProto` |

May import `schemas.errors` only.
"""
