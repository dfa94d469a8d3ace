"""Processes and signals: what every tool needs before and around its work.

| module | holds |
| --- | --- |
| `signals` | SIGTERM and SIGINT held before the worker's own handlers are in place |
| `child_processes` | children that die with their parent, liveness, free ports |

May import the standard library only, so a console script can load it first.
"""
