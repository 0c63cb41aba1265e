"""The `gridbus` command: HTCondor's tools as subcommands (`gridbus q` is condor_q, and so on).

    gridbus [--pool URL] submit job.sub | q [-nobatch|-totals|-af A B|-l|-json ...] | status | rm |
            hold | release | edit | history | wait | userprio | drain | analyze | pool ...

`gridbus -version` (or --version), and -version on any command (`gridbus q -version`), prints the
version lines as condor_version and every condor tool print them, and does nothing else.

The pool is `--pool`, else GRIDBUS_URL, else the configuration file's GRIDBUS_URL. Exit status 0 on
success; otherwise one line on stderr that says what failed (an unreachable broker names its URL, a
refusal says who may not do what).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from gridbus.console.cli import dag, jobs, pool_view
from gridbus.console.version import version_lines

VERSION_FLAGS = ("-version", "--version")


class CliError(Exception):
    """A failure to report as one line and exit status 1."""


def pool_url(given: str | None) -> str:
    """--pool, else GRIDBUS_URL, else the configuration file (gridbus.config)."""
    if given:
        return given
    if os.environ.get("GRIDBUS_URL"):
        return os.environ["GRIDBUS_URL"]
    from gridbus.config import Config

    return Config.load().url()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gridbus", description="An HTCondor-style pool on RabbitMQ: submit and watch jobs.")
    parser.add_argument("--pool", "-pool", metavar="URL", help="the pool's broker URL (default: GRIDBUS_URL, then the config file)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    jobs.register(sub)
    dag.register(sub)
    pool_view.register(sub)
    try:  # owned by the master/config part: pool, broker, config
        from gridbus.console.cli import pool as pool_commands
    except ImportError:
        pool_commands = None  # type: ignore[assignment]  # a console without the pool commands' extras
    if pool_commands is not None and hasattr(pool_commands, "register"):
        pool_commands.register(sub)
    _add_version(parser)
    for command in {id(p): p for p in sub.choices.values()}.values():  # aliases share a parser
        _add_version(command)
    return parser


class _PrintVersion(argparse.Action):
    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        sys.stdout.write(version_lines())
        parser.exit(0)


def _add_version(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(*VERSION_FLAGS, nargs=0, action=_PrintVersion,
                        help="print the version lines ($CondorVersion, $CondorPlatform) and exit")


def asks_version(argv: Sequence[str]) -> bool:
    """Whether -version is among the options (before any `--`), wherever it stands: condor's tools
    print their version for it whatever else is on the line, and so does every gridbus command."""
    for token in argv:
        if token == "--":
            return False
        if token in VERSION_FLAGS:
            return True
    return False


def _autoformat_options(argv: Sequence[str]) -> tuple[list[str], str]:
    """HTCondor's `-af:jh` spelling: the options after the colon are taken off, `-af` is left."""
    out, options = [], ""
    for token in argv:
        head, colon, tail = token.partition(":")
        if colon and head in ("-af", "-autoformat", "--af"):
            out.append("-af")
            options = tail
        else:
            out.append(token)
    return out, options


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if asks_version(argv):  # before parsing: `gridbus pool up -version` needs no pool and no other argument
        sys.stdout.write(version_lines())
        return 0
    parser = build_parser()
    argv, af_options = _autoformat_options(argv)
    args = parser.parse_args(argv)
    args.af_options = af_options
    prog = f"gridbus {args.command}"
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.error(f"{args.command} has no handler")
    try:
        url = pool_url(getattr(args, "pool", None))
        if args.command not in ("pool", "broker", "config", "config_val"):
            from gridbus import personal

            url = personal.console_url(url)  # a personal pool's jobs are the Unix user's
        # Every console class (Schedd, Collector, ...) reads GRIDBUS_URL when given no URL.
        os.environ["GRIDBUS_URL"] = url
        args.url = url
        code = handler(args)
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # one line, never a traceback, for whatever failed
        print(f"{prog}: {describe(exc)}", file=sys.stderr)
        if os.environ.get("GRIDBUS_DEBUG"):
            raise
        return 1
    sys.stdout.flush()
    return int(code or 0)


def describe(exc: BaseException) -> str:
    """One sentence for an exception: the refusal's own text, the broker URL, or the message."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
